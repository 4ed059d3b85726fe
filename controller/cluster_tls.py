"""The cluster's own certificates: every connection between the coordinator, the scheduler, the
workers and their nannies is TLS with both ends authenticated (docs/cluster.md, Security).

A worker runs whatever a Dask client submits, as root. So nothing may reach a scheduler or a worker
without a certificate of this cluster's own CA, and that certificate's key is readable by root
only: `catnip cluster scheduler` makes a CA, signs one certificate with it and throws the CA's key
away (nobody can sign another), in a folder of mode 0700 with files of mode 0600. Workers and the
coordinator on other machines get the same three files by copying the folder (scp -rp, as root).
Dask's TLS (distributed.security.Security) then refuses any peer whose certificate the CA did not
sign, and any peer without one, in both directions.
"""

from __future__ import annotations

import datetime
import os
import shutil
import socket
import stat
import tempfile
from pathlib import Path

from catnip.testbed import paths

CA, CERT, KEY = "ca.pem", "cert.pem", "key.pem"
FILES = (CA, CERT, KEY)
VALID_DAYS = 365
SKEW = datetime.timedelta(hours=1)  # another machine's clock may be behind ours


class TLSError(RuntimeError):
    """The cluster's certificates are missing, unsafe or expired; the message is one line saying how to fix it."""


def default_dir() -> Path:
    return paths.data_dir() / "cluster" / "tls"


def private(path: Path, kind: str, mode: int) -> None:
    """`path` is a `kind` owned by us that nobody else may read or write (no symlink: it could point anywhere)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        raise TLSError(f"{path} is missing") from None
    if kind == "folder" and not stat.S_ISDIR(st.st_mode) or kind == "file" and not stat.S_ISREG(st.st_mode):
        raise TLSError(f"{path} is not a {kind} (a symlink is refused too)")
    if st.st_uid != os.geteuid():
        raise TLSError(f"{path} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()}): chown it")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise TLSError(f"{path} has mode {stat.S_IMODE(st.st_mode):04o}, others may use it; allowed"
                       f" {mode:04o} (chmod {mode:o} {path})")


def check(folder: Path) -> dict[str, Path]:
    """The three files' paths, once the folder and each file is private to us and the certificate
    is valid now; TLSError otherwise."""
    folder = Path(folder)
    if not folder.exists():
        raise TLSError(f"no cluster certificates in {folder}: start `catnip cluster scheduler` on this machine, or"
                       " copy the scheduler machine's certificate folder (data/cluster/tls) here, as root, and give its path"
                       " with --tls-dir (docs/cluster.md, Security)")
    private(folder, "folder", 0o700)
    files = {name: folder / name for name in FILES}
    for path in files.values():
        if not path.exists() and not path.is_symlink():
            raise TLSError(f"{path} is missing: copy the scheduler machine's whole folder again, or make new"
                           " certificates with `catnip cluster scheduler --new-certs`")
        private(path, "file", 0o600)
    from cryptography import x509
    cert = x509.load_pem_x509_certificate(files[CERT].read_bytes())
    utc = datetime.timezone.utc
    # cryptography 42 added the *_utc names and deprecated the naive ones (UTC too)
    start = getattr(cert, "not_valid_before_utc", None) or cert.not_valid_before.replace(tzinfo=utc)
    end = getattr(cert, "not_valid_after_utc", None) or cert.not_valid_after.replace(tzinfo=utc)
    if not start <= datetime.datetime.now(utc) <= end:
        raise TLSError(f"{files[CERT]} is valid {start:%Y-%m-%d} to {end:%Y-%m-%d}, not now: make new ones with"
                       " `catnip cluster scheduler --new-certs` and copy them to the workers again")
    return files


def create(folder: Path) -> dict[str, Path]:
    """A new CA and a certificate it signs, written into `folder` (made, or replaced whole)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder = Path(folder)
    now = datetime.datetime.now(datetime.timezone.utc)
    name = f"{socket.gethostname()} {now:%Y-%m-%dT%H:%M:%SZ}"

    def build(subject: str, issuer: str, public, signer, ca: bool):
        b = (x509.CertificateBuilder()
             .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
             .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
             .public_key(public).serial_number(x509.random_serial_number())
             .not_valid_before(now - SKEW).not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True))
        if ca:
            b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        else:  # one certificate for every role: each end is both a TLS server and a client
            b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                       ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        return b.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = f"catnip cluster CA {name}"
    ca_cert = build(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True)
    cert = build(f"catnip cluster {name}", ca_name, key.public_key(), ca_key, ca=False)
    pem = serialization.Encoding.PEM
    contents = {CA: ca_cert.public_bytes(pem), CERT: cert.public_bytes(pem),
                KEY: key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())}
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Written in a fresh 0700 folder beside it, then renamed into place: no moment where a file is
    # readable by others, and no half-written set left by a failure.
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        for filename, data in contents.items():
            fd = os.open(tmp / filename, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        if folder.exists() or folder.is_symlink():
            private(folder, "folder", 0o700)  # replaced only if it is ours
            shutil.rmtree(folder)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return check(folder)


def ensure(folder: Path, new: bool = False) -> tuple[dict[str, Path], bool]:
    """The folder's certificates, made first if it has none (or `new`); and whether they were made."""
    if new or not Path(folder).exists():
        return create(folder), True
    return check(folder), False


def scratch_dir() -> Path:
    """Where a worker and its nanny keep their files (spilled data as pickles, which the worker loads
    back): a folder only root can enter. Dask's default, /tmp/dask-scratch-space, is anyone's to
    create first, and whoever owns it could swap a pickle that root then loads."""
    folder = paths.state_dir() / "dask-scratch"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    private(folder, "folder", 0o700)
    return folder


def security(folder: Path):
    """Dask's Security for any role (coordinator, scheduler, worker, nanny) from the folder's files:
    TLS only, the peer's certificate required and checked against the cluster's CA."""
    from distributed.security import Security
    f = check(folder)
    ca, cert, key = str(f[CA]), str(f[CERT]), str(f[KEY])
    return Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, tls_scheduler_cert=cert,
                    tls_scheduler_key=key, tls_worker_cert=cert, tls_worker_key=key, require_encryption=True)


def dask_args(folder: Path) -> list[str]:
    """`dask scheduler` and `dask worker`'s own TLS options for the folder's files."""
    f = check(folder)
    return ["--tls-ca-file", str(f[CA]), "--tls-cert", str(f[CERT]), "--tls-key", str(f[KEY])]


def check_address(address: str, option: str) -> None:
    """A cluster address must be tls://; TLSError naming the fix otherwise."""
    if not address.startswith("tls://"):
        scheme = address.split("://", 1)[0] + "://" if "://" in address else "an address without a scheme"
        rest = address.split("://", 1)[-1]
        raise TLSError(f"{option} {address}".strip() + f": {scheme} is refused, the cluster speaks TLS only: give"
                       f" tls://{rest}")
