"""Reports for managers."""
