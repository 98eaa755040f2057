"""pgJDBC (Debian's libpostgresql-jdbc-java): runs jdbc/JdbcCheck.java, a
single-file Java program making DatabaseMetaData calls as tools do,
prepared batches, dates, timestamps, arrays, transactions and errors,
against the module's server."""

import os
import shutil
import subprocess
from pathlib import Path

JAR = Path(os.environ.get("FRESHET_JDBC_JAR", "/usr/share/java/postgresql.jar"))


def test_pgjdbc_metadata_batches_and_types(conninfo):
    assert shutil.which("java"), "java is required (scripts/test.sh installs it)"
    assert JAR.exists(), f"{JAR} is missing (scripts/test.sh installs libpostgresql-jdbc-java)"
    fields = dict(kv.split("=", 1) for kv in conninfo.split())
    url = (
        f"jdbc:postgresql://{fields['host']}:{fields['port']}/{fields['dbname']}"
        f"?user={fields['user']}"
    )
    source = Path(__file__).parent / "jdbc" / "JdbcCheck.java"
    run = subprocess.run(
        ["java", "-cp", str(JAR), str(source), url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "jdbc checks passed" in run.stdout
