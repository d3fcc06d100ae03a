"""A real S3 API server on loopback for tests: moto's threaded server, a bucket, and s3fs options.

Remote storage fails in ways a local folder never does (listing caches, ETags, objects replaced or
deleted after listing), so the storage tests and every reader plugin's S3 tests run against moto's
S3 server (``pip install 'moto[server]' s3fs boto3``). Only 127.0.0.1 is ever contacted;
credentials are fake and set for the duration of the context only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class S3:
    """A running server: its endpoint, a bucket, a boto3 client and s3fs ``storage_options``."""

    endpoint: str
    bucket: str
    client: Any
    server: Any

    @property
    def storage_options(self) -> dict[str, Any]:
        """Options for ``Dataset.from_path(..., storage_options=...)``: no listing cache, few retries."""
        return {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": self.endpoint, "region_name": "us-east-1"},
            "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2, "read_timeout": 10},
            "use_listings_cache": False,
            "skip_instance_cache": True,
        }

    def url(self, key: str = "") -> str:
        """``s3://bucket/key`` (the bucket itself for an empty key)."""
        return f"s3://{self.bucket}/{key}".rstrip("/")

    def put(self, key: str, data: bytes) -> None:
        """Write one object."""
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def upload_dir(self, folder: str, prefix: str) -> None:
        """Upload every file under ``folder`` to ``prefix/`` (relative paths kept)."""
        for dirpath, _, names in os.walk(folder):
            for n in names:
                full = os.path.join(dirpath, n)
                rel = os.path.relpath(full, folder).replace(os.sep, "/")
                with open(full, "rb") as f:
                    self.put(f"{prefix}/{rel}", f.read())


@contextmanager
def moto_s3(bucket: str = "zephon-test") -> Iterator[S3]:
    """Start moto's S3 server on a free loopback port with one bucket; stop it afterwards."""
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise

    saved = {k: os.environ.get(k) for k in (*FAKE_ENV, "AWS_ENDPOINT_URL")}
    os.environ.update(FAKE_ENV)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        # Safety net: any S3 client made without our storage options (for instance the kernel's
        # format detection) still talks to this loopback server, never to a real endpoint.
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket=bucket)
        yield S3(endpoint, bucket, client, server)
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
