"""CLI commands: placeholder until its issue lands."""


def register(sub) -> None:
    pass
