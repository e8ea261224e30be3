"""Row ids: what number can name a row."""

# Ids are INTEGER columns: 32-bit signed on PostgreSQL (64-bit on SQLite), so a larger number can name no row on
# either; PostgreSQL would refuse it in a query ("integer out of range") rather than find nothing.
MAX_ID = 2**31 - 1
