// Apart from the code that reads pages (page.ts): the API's schemas, and so
// the client library, need the orders without loading the query builder.

/** Which end of a list comes first: its newest rows (highest ids) or its oldest. */
export const LIST_ORDERS = ['newest', 'oldest'] as const;
export type ListOrder = (typeof LIST_ORDERS)[number];
