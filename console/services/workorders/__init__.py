"""Work orders: one per open error group; acknowledged, assigned and closed by people, or by recovery."""
