/**
 * Class of the advisory lock (with the pool's id) that orders a pool's
 * waiting line against its freed slots: taken exclusively by an allocate
 * about to make its lease wait, shared by every release_slot. An arbitrary
 * constant, apart from any other lock of the database.
 */
export const POOL_LINE_LOCK = 0x5057;
