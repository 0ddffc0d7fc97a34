// The client library's public entry (`slipway/client` in package.json's exports).
export * from './SlipwayClient.ts';
