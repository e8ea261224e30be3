"""Work orders: one per open error group, worked by people, closed by recovery."""
