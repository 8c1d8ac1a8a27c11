"""A command works in the database its caller holds (the daemon's), or opens and closes its own."""

from __future__ import annotations

from watchkeeper.store.db import Database, open_database


class CountingDatabase(Database):
    """A real database that counts how often it was closed."""

    closes = 0

    def close(self) -> None:
        CountingDatabase.closes += 1
        super().close()


def test_a_given_database_is_used_and_left_open_for_its_owner(sqlite_url: str) -> None:
    owner = CountingDatabase(sqlite_url)
    CountingDatabase.closes = 0
    with open_database(sqlite_url, given=owner) as db:
        assert db is owner
    assert CountingDatabase.closes == 0
    owner.close()


def test_without_one_the_command_opens_its_own_on_the_url(sqlite_url: str) -> None:
    with open_database(sqlite_url) as db:
        assert isinstance(db, Database) and db.url == sqlite_url
        with db.session() as s:
            assert s.connection() is not None
