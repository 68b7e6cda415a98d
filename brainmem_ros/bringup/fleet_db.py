"""``brainmem-ros fleet-db``: a PostgreSQL server for a fleet, in one folder, in one command.

For a newcomer trying the fleet and for the tests; a building's robots would use the site's own
server the same way (its administrator runs ``robot`` for each robot). ``start`` makes the server
if the folder has none (initdb with password authentication, an administrator ``brainmem`` whose
password goes into a passfile), starts it on a private Unix socket in the folder (no TCP port is
opened), creates the ``brainmem`` database and the fleet's schema, and prints the administrator's
connection string as its last line. ``robot NAME`` gives a robot its own role and passfile and
prints that robot's connection string. As root the server runs as the ``postgres`` system user,
since initdb refuses to run as root.
"""
from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

from brainmem_ros.core.errors import InvalidRequest, StoreUnavailable

__all__ = ["start", "stop", "add_robot_dsn", "dsn_for", "server_binaries"]

ADMIN = "brainmem"
DATABASE = "brainmem"
RESERVED = {ADMIN, "postgres", "brainmem_robots"}


def server_binaries() -> Path:
    """Return the folder of initdb and pg_ctl, or raise StoreUnavailable saying how to get them."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                      key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
    if versions:
        return versions[-1].parent
    raise StoreUnavailable("PostgreSQL's server is not installed (initdb not found): "
                           "apt-get install postgresql")


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _give_to_server_user(path: Path) -> None:
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(path, user.pw_uid, user.pw_gid)


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise StoreUnavailable(f"{what} failed: {(done.stderr or done.stdout).strip()}")


def dsn_for(folder: Path, user: str) -> str:
    """Return ``user``'s connection string to the server in ``folder`` (password in a passfile)."""
    folder = folder.resolve()
    port = (folder / "port").read_text().strip()
    return (f"postgresql:///{DATABASE}?host={quote(str(folder / 'run'), safe='/')}&port={port}"
            f"&user={user}&passfile={quote(str(folder / f'{user}.pgpass'), safe='/')}")


def _passfile(folder: Path, user: str, password: str) -> None:
    path = folder / f"{user}.pgpass"
    port = (folder / "port").read_text().strip()
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(f"*:{port}:*:{user}:{password}\n")


def start(folder: Path, port: int = 5432) -> str:
    """Make (if new) and start the server in ``folder``; the administrator's connection string."""
    import psycopg

    from brainmem_ros.core.fleet.server import create_schema

    folder = folder.expanduser().resolve()
    bindir = server_binaries()
    data, run = folder / "data", folder / "run"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # the server's user walks through it to its data and socket
    if os.geteuid() == 0:
        private = [p for p in folder.parents if not p.stat().st_mode & 0o001]
        if private:
            raise StoreUnavailable(f"the postgres user cannot reach {folder}: {private[0]} is "
                                   "private; choose a folder it can reach (under /tmp, /srv)")
    if not (data / "PG_VERSION").exists():
        (folder / "port").write_text(f"{port}\n")
        for sub in (data, run):
            sub.mkdir(exist_ok=True)
            _give_to_server_user(sub)
        password = secrets.token_urlsafe(24)
        pwfile = run / "initdb.pw"
        pwfile.write_text(password + "\n")
        pwfile.chmod(0o600)
        _give_to_server_user(pwfile)
        try:
            _run(_as_server_user([str(bindir / "initdb"), "-D", str(data), "-U", ADMIN,
                                  "--auth-local=scram-sha-256", "--auth-host=scram-sha-256",
                                  f"--pwfile={pwfile}", "--no-locale", "-E", "UTF8"]), "initdb")
        finally:
            pwfile.unlink(missing_ok=True)
        _passfile(folder, ADMIN, password)
    port = int((folder / "port").read_text())
    status = subprocess.run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "status"]),
                            capture_output=True, text=True, timeout=60)
    if status.returncode != 0:
        log = folder / "server.log"
        log.touch()
        _give_to_server_user(log)
        _run(_as_server_user([
            str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-o",
            f"-p {port} -k {run} -c listen_addresses=''", "start"
        ]), "starting the server")
    admin = dsn_for(folder, ADMIN)
    with psycopg.connect(admin.replace(f"/{DATABASE}?", "/postgres?"), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            (DATABASE, )).fetchone():
            conn.execute(f"CREATE DATABASE {DATABASE}")
    with psycopg.connect(admin, autocommit=True) as conn:
        create_schema(conn)
    return admin


def add_robot_dsn(folder: Path, name: str) -> str:
    """Give robot ``name`` its own role and passfile; its connection string."""
    import psycopg

    from brainmem_ros.core.fleet.record import ROBOT_NAME
    from brainmem_ros.core.fleet.server import add_robot

    if not ROBOT_NAME.fullmatch(name) or name in RESERVED:
        raise InvalidRequest(f"{name!r} cannot name a robot: lower-case letters, digits and "
                             f"underscores, not one of {', '.join(sorted(RESERVED))}")
    folder = folder.expanduser().resolve()
    password = secrets.token_urlsafe(24)
    with psycopg.connect(dsn_for(folder, ADMIN), autocommit=True) as conn:
        add_robot(conn, name, password)
    _passfile(folder, name, password)
    return dsn_for(folder, name)


def stop(folder: Path) -> None:
    folder = folder.expanduser().resolve()
    _run(_as_server_user([str(server_binaries() / "pg_ctl"), "-D", str(folder / "data"), "-m",
                          "fast", "-w", "stop"]), "stopping the server")
