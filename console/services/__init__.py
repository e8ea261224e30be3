"""Operations everyone calls (views, API, CLI, jobs); they know no Flask."""
