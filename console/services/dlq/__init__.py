"""Dead letters and work orders: parked, grouped, filtered, replayed in bulk, closed."""
