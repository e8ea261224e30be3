"""Recovery people can trust: data fixes behind a second person's approval, runbooks, saga workflows."""
