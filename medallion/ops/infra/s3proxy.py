"""A real S3-compatible server on loopback: S3Proxy with its filesystem backend.

``make s3proxy`` resolves S3Proxy from Maven Central into ``infra/s3proxy/lib`` (git-ignored);
this module starts it on 127.0.0.1 at a port chosen free at run time, with keys made up for the
run, and stops it. Objects are plain files under ``data_dir/<bucket>/<key>``, so they survive a
restart, and a test can look at exactly what a client wrote.

``python -m medallion.ops.infra.s3proxy --data DIR`` runs one in the foreground for a manual try.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[3]
DEFAULT_HOME = REPO / "infra" / "s3proxy"
ENV_VAR_HOME = "MEDALLION_S3PROXY_HOME"


class S3ProxyError(RuntimeError):
    """S3Proxy is not installed, or did not start."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def s3proxy_home() -> Path:
    """The folder holding ``lib/`` (the jars) and ``logback.xml``."""
    return Path(os.environ.get(ENV_VAR_HOME) or DEFAULT_HOME)


@dataclass
class S3ProxyServer:
    """One S3Proxy process serving ``data_dir`` on ``127.0.0.1:port``."""

    data_dir: Path
    port: int = field(default_factory=free_port)
    # Keys made up for the run unless given; never written anywhere but the private conf file.
    access_key: str = field(default_factory=lambda: f"medallion-{secrets.token_hex(4)}")
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(24), repr=False)
    home: Path = field(default_factory=s3proxy_home)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def _write_properties(self) -> Path:
        run_dir = self.data_dir.parent / f".{self.data_dir.name}-s3proxy"
        run_dir.mkdir(parents=True, exist_ok=True)
        properties = run_dir / "s3proxy.conf"
        # The keys are made up for this run; the file is private and never in the repository.
        fd = os.open(properties, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(
                f"s3proxy.endpoint={self.endpoint}\n"
                "s3proxy.authorization=aws-v2-or-v4\n"
                f"s3proxy.identity={self.access_key}\n"
                f"s3proxy.credential={self.secret_key}\n"
                "jclouds.provider=filesystem-nio2\n"
                f"jclouds.filesystem.basedir={self.data_dir}\n"
            )
        return properties

    def start(self, timeout: float = 60.0) -> S3ProxyServer:
        """Start the server and wait until it answers HTTP."""
        lib = self.home / "lib"
        if not any(lib.glob("s3proxy-*.jar")):
            raise S3ProxyError(f"S3Proxy is not installed in {lib}: run `make s3proxy`")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        properties = self._write_properties()
        command = [
            "java", "-Xmx256m", f"-Dlogback.configurationFile={self.home / 'logback.xml'}",
            "-cp", f"{lib}/*", "org.gaul.s3proxy.Main", "--properties", str(properties),
        ]
        log_file = (properties.parent / "s3proxy.log").open("ab")
        self.process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        log_file.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise S3ProxyError(f"S3Proxy exited with {self.process.returncode}; see "
                                   f"{properties.parent / 's3proxy.log'}")
            if self._answers():
                log.info("S3Proxy serving %s at %s", self.data_dir, self.endpoint)
                return self
            time.sleep(0.2)
        self.stop()
        raise S3ProxyError(f"S3Proxy did not answer at {self.endpoint} within {timeout:.0f}s")

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(f"{self.endpoint}/", timeout=1)  # noqa: S310 - loopback only
        except urllib.error.HTTPError:
            return True  # 403 for an unsigned request: the server is up
        except OSError:
            return False
        return True

    def stop(self, kill: bool = False) -> None:
        """Stop the server: SIGTERM and wait, or SIGKILL at once (a crash)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self.process is not None and self.process.poll() is None


def main(argv: list[str] | None = None) -> int:
    """Serve a folder over S3 on loopback until interrupted; print how to reach it."""
    parser = argparse.ArgumentParser(prog="python -m medallion.ops.infra.s3proxy", description=__doc__)
    parser.add_argument("--data", required=True, help="folder holding the buckets")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    access_key = os.environ.get("AWS_ACCESS_KEY_ID")
    secret_key = os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not access_key or not secret_key:
        parser.error("export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (any made-up pair): the "
                     "server accepts them, and medallion's clients find them in the environment")
    server = S3ProxyServer(Path(args.data).resolve(), port=args.port or free_port(),
                           access_key=access_key, secret_key=secret_key)
    # SIGTERM (kill, make's ^C) must stop the JVM too: it runs in a session of its own.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.start()
    print(f"S3Proxy at {server.endpoint}, serving {server.data_dir}; in the shell that runs "
          f"medallion: export MEDALLION_S3_ENDPOINT={server.endpoint}", flush=True)
    try:
        while server.running:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
