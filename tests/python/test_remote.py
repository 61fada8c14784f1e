"""Shards read from URLs (http, https, s3) against servers on loopback:
the test's own object store (remote_server.py: ranges, ETags, Signature V4
checked from the secret, injected faults) and nginx. Every remote read must
give the local read's output element by element."""

import gzip
import io
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time

import pytest

import sluice
from sluice import Dataset
from remote_server import Server, put_object
from test_records import frame

KEY, SECRET = "AKIDTEST", "s3cr3t/with+chars"


def _tool_env():
    """The environment for the servers and tools the tests start: without
    the sanitizer runtime run.py preloads for this interpreter."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return env


def _records(seed, n):
    rnd = random.Random(seed)
    return [bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(1, 24000)))
            for _ in range(n)]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """root/bucket/{data-0000i.tfrecord, .tfrecord.gz, shard-0000i.tar}, each
    TFRecord file ~1.5 MB (several 1 MiB chunks, records across them)."""
    root = tmp_path_factory.mktemp("store")
    b = root / "bucket"
    (b / "train").mkdir(parents=True)
    for i in range(3):
        recs = _records(i, 130)
        data = b"".join(frame(r) for r in recs)
        (b / "train" / ("data-%05d.tfrecord" % i)).write_bytes(data)
        (b / "train" / ("data-%05d.tfrecord.gz" % i)).write_bytes(gzip.compress(data, 1))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for j, r in enumerate(recs[:40]):
                for ext, payload in (("jpg", r), ("cls", str(j % 7).encode())):
                    info = tarfile.TarInfo("s%d/%04d.%s" % (i, j, ext))
                    info.size = len(payload)
                    t.addfile(info, io.BytesIO(payload))
        (b / "train" / ("shard-%05d.tar" % i)).write_bytes(buf.getvalue())
    return str(root)


def _names(kind):
    return ["train/data-%05d.%s" % (i, kind) for i in range(3)]


def _local(store, kind, **kw):
    files = [os.path.join(store, "bucket", n) for n in _names(kind)]
    return [bytes(x) for x in Dataset.tfrecord(files, **kw).as_numpy_iterator()]


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    """No AWS settings from the machine: only what a test sets."""
    for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
              "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    return monkeypatch


def test_http_tfrecord_equals_local(store):
    want = _local(store, "tfrecord")
    with Server(store) as srv:
        urls = ["%s/bucket/%s" % (srv.url, n) for n in _names("tfrecord")]
        got = [bytes(x) for x in Dataset.tfrecord(urls).as_numpy_iterator()]
        gz = [bytes(x) for x in Dataset.tfrecord(
            [u + ".gz" for u in urls], compression_type="GZIP").as_numpy_iterator()]
    assert got == want and gz == want
    assert len(want) == 390


def test_http_webdataset_equals_local(store):
    local = [os.path.join(store, "bucket", "train", "shard-%05d.tar" % i) for i in range(3)]
    want = list(Dataset.webdataset(local, keys=("jpg", "cls"), with_keys=True)
                .as_numpy_iterator())
    with Server(store) as srv:
        urls = srv.url + "/bucket/train/shard-{00000..00002}.tar"
        got = list(Dataset.webdataset(urls, keys=("jpg", "cls"), with_keys=True)
                   .as_numpy_iterator())
    assert len(got) == 120
    assert [(bytes(a), int(b), k) for a, b, k in got] == [(bytes(a), int(b), k)
                                                          for a, b, k in want]


def test_s3_signed_requests(store, aws_env):
    want = _local(store, "tfrecord")
    with Server(store, secret=SECRET, access_key=KEY) as srv:
        aws_env.setenv("AWS_ENDPOINT_URL", srv.url)
        aws_env.setenv("AWS_ACCESS_KEY_ID", KEY)
        aws_env.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        aws_env.setenv("AWS_REGION", "eu-west-3")
        urls = ["s3://bucket/" + n for n in _names("tfrecord")]
        got = [bytes(x) for x in Dataset.tfrecord(urls).as_numpy_iterator()]
        assert got == want
        assert srv.signed >= 6 and srv.bad_signatures == 0
        # the wrong secret: the server's own check refuses it, not retried
        aws_env.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
        n = srv.requests
        with pytest.raises(sluice.PermissionDeniedError) as e:
            list(Dataset.tfrecord(urls[:1]))
        assert srv.requests == n + 1
    msg = str(e.value)
    assert "s3://bucket/train/data-00000.tfrecord" in msg and "403" in msg
    assert "SignatureDoesNotMatch" in msg and "wrong" not in msg and KEY not in msg


def test_s3_credentials_from_profile_files(store, aws_env, tmp_path):
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = nope\naws_secret_access_key = nope\n\n"
        "[train]\naws_access_key_id = %s\naws_secret_access_key = %s\n" % (KEY, SECRET))
    (tmp_path / "config").write_text("[profile train]\nregion = ap-south-1\n")
    aws_env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    aws_env.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    aws_env.setenv("AWS_PROFILE", "train")
    with Server(store, secret=SECRET, access_key=KEY) as srv:
        aws_env.setenv("AWS_ENDPOINT_URL_S3", srv.url)
        got = [bytes(x) for x in Dataset.tfrecord("s3://bucket/" + _names("tfrecord")[1])
               .as_numpy_iterator()]
        assert srv.bad_signatures == 0
    assert got == _local(store, "tfrecord")[130:260]


def test_session_token_is_signed_and_never_shown(store, aws_env):
    with Server(store, secret=SECRET, access_key=KEY) as srv:
        aws_env.setenv("AWS_ENDPOINT_URL", srv.url)
        aws_env.setenv("AWS_ACCESS_KEY_ID", KEY)
        aws_env.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        aws_env.setenv("AWS_SESSION_TOKEN", "TOKEN-abc/def==")
        assert len(list(Dataset.tfrecord("s3://bucket/" + _names("tfrecord")[0]))) == 130
        assert srv.bad_signatures == 0
        with pytest.raises(sluice.NotFoundError) as e:
            list(Dataset.tfrecord("s3://bucket/train/missing.tfrecord"))
    assert "s3://bucket/train/missing.tfrecord" in str(e.value)
    assert "TOKEN" not in str(e.value) and "404" in str(e.value)


def test_list_files_over_a_bucket(store, aws_env):
    # ListObjectsV2 page by page (2 keys a page here), the pattern matched
    # on each key, sorted: list_files -> tfrecord as over a local folder
    with Server(store, secret=SECRET, access_key=KEY) as srv:
        srv.max_keys = 2
        aws_env.setenv("AWS_ENDPOINT_URL", srv.url)
        aws_env.setenv("AWS_ACCESS_KEY_ID", KEY)
        aws_env.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        files = Dataset.list_files("s3://bucket/train/data-*.tfrecord", shuffle=False)
        got = [x.decode() for x in files.as_numpy_iterator()]
        assert got == ["s3://bucket/" + n for n in _names("tfrecord")]
        assert srv.lists == 3 and srv.bad_signatures == 0  # 6 keys under the prefix
        recs = Dataset.tfrecord(files)
        assert [bytes(x) for x in recs.as_numpy_iterator()] == _local(store, "tfrecord")
        assert len(list(Dataset.list_files("s3://bucket/*/shard-*.tar"))) == 3
        with pytest.raises(sluice.NotFoundError) as e:
            Dataset.list_files("s3://bucket/train/nothing-*")
        assert "s3://bucket/train/nothing-*" in str(e.value)
        with pytest.raises(sluice.UnsupportedError):
            Dataset.list_files(srv.url + "/bucket/*.tar")


@pytest.fixture(scope="module")
def image_store(image_dir, tmp_path_factory):
    """bucket/imgs: the test images as ImageFolder classes, plus what the
    walk must order or leave out: a nested folder, a file over the first
    piece's 256 KiB, hidden files, other extensions, a file in no class."""
    root = tmp_path_factory.mktemp("imgstore")
    imgs = root / "bucket" / "imgs"
    shutil.copytree(image_dir, imgs)
    first = sorted(os.listdir(imgs))[0]
    (imgs / first / "sub").mkdir()
    shutil.copy(imgs / first / "00.jpg", imgs / first / "sub" / "zz.jpg")
    (imgs / first / "zzz-big.jpg").write_bytes(os.urandom(700000))
    (imgs / first / ".hidden.jpg").write_bytes(b"x")
    (imgs / first / "notes.txt").write_bytes(b"x")
    (imgs / "loose.jpg").write_bytes(b"x")
    return str(root)


def test_image_folder_over_a_bucket(image_store, aws_env):
    local = os.path.join(image_store, "bucket", "imgs")
    want = [(bytes(b), int(l), p.decode()[len(local):]) for b, l, p in
            Dataset.image_folder(local, with_paths=True).as_numpy_iterator()]
    with Server(image_store, secret=SECRET, access_key=KEY) as srv:
        aws_env.setenv("AWS_ENDPOINT_URL", srv.url)
        aws_env.setenv("AWS_ACCESS_KEY_ID", KEY)
        aws_env.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        root = "s3://bucket/imgs"
        got = [(bytes(b), int(l), p.decode()[len(root):]) for b, l, p in
               Dataset.image_folder(root, with_paths=True).as_numpy_iterator()]
        assert srv.bad_signatures == 0
        # decoded through map_image, as from local disk
        skip = sluice.Options(error_policy="skip", error_log_limit=0)  # the big file: noise
        a = [x for x, _ in Dataset.image_folder(local).map_image("eval", 32)
             .with_options(skip).as_numpy_iterator()]
        b = [x for x, _ in Dataset.image_folder(root + "/").map_image("eval", 32)
             .with_options(skip).as_numpy_iterator()]
    assert got == want and len(got) == 38
    assert any(p.endswith("/sub/zz.jpg") for _, _, p in got)
    assert len(a) == len(b) == 37 and all((x == y).all() for x, y in zip(a, b))


def test_from_files_mixes_urls_and_local_paths(image_store, tmp_path):
    local = os.path.join(image_store, "bucket", "imgs")
    paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(local) for f in fs)
    want = [open(p, "rb").read() for p in paths]
    with Server(image_store) as srv:
        mixed = [p if i % 3 == 0 and "big" not in p else srv.url + "/bucket/imgs" + p[len(local):]
                 for i, p in enumerate(paths)]
        got = [bytes(b) for b in Dataset.from_files(mixed).as_numpy_iterator()]
        assert got == [w for w in want]
        # a missing object: NotFoundError naming it, or skipped by the policy
        gone = mixed[:2] + [srv.url + "/bucket/imgs/gone.jpg"] + mixed[2:4]
        with pytest.raises(sluice.NotFoundError) as e:
            list(Dataset.from_files(gone))
        assert "/bucket/imgs/gone.jpg" in str(e.value)
        ds = Dataset.from_files(gone).with_options(error_policy="skip", error_log_limit=0)
        assert [bytes(b) for b in ds.as_numpy_iterator()] == want[:4]
        assert srv.bytes_sent > 700000  # the big file came in two pieces
        # file_list: a local list of relative paths, the root a URL
        lst = os.path.join(str(tmp_path), "list.txt")
        with open(lst, "w") as f:
            for i, p in enumerate(paths[:6]):
                f.write("%s %d\n" % (p[len(local) + 1:], i))
        got = [(bytes(b), int(l)) for b, l in
               Dataset.file_list(lst, root=srv.url + "/bucket/imgs").as_numpy_iterator()]
        assert got == [(w, i) for i, w in enumerate(want[:6])]


def test_not_found_and_forbidden_are_not_retried(store):
    with Server(store) as srv:
        srv.forbidden = "bucket/train/data-00001"
        with pytest.raises(sluice.NotFoundError) as e:
            list(Dataset.tfrecord(srv.url + "/bucket/nope.tfrecord"))
        assert srv.requests == 1
        assert "/bucket/nope.tfrecord" in str(e.value) and "NoSuchKey" in str(e.value)
        with pytest.raises(PermissionError):
            list(Dataset.tfrecord(srv.url + "/bucket/" + _names("tfrecord")[1]))
        assert srv.requests == 2
        # the error policy: the forbidden file is skipped like a local one
        urls = ["%s/bucket/%s" % (srv.url, n) for n in _names("tfrecord")]
        ds = Dataset.tfrecord(urls).with_options(error_policy="skip", error_log_limit=0)
        assert len(list(ds)) == 260


def test_secrets_in_the_url_never_shown(store):
    with Server(store) as srv:
        url = srv.url.replace("http://", "http://user:pa55word@") + \
            "/bucket/gone.tfrecord?X-Amz-Signature=deadbeef"
        with pytest.raises(sluice.NotFoundError) as e:
            list(Dataset.tfrecord(url))
    msg = str(e.value)
    assert "pa55word" not in msg and "deadbeef" not in msg and "/bucket/gone.tfrecord?..." in msg


def _inject_faults(srv, every):
    """Resets mid-body on 30% of responses, and a burst of two 503s at
    every `every`-th request."""
    srv.reset_prob = 0.3

    def bursts(s, path, n):
        if n % every == 0:
            s.fail_next = 2
    srv.on_request = bursts


def test_faults_lose_and_repeat_nothing(store):
    # resets mid-body at random offsets and 503 bursts: every record once,
    # in order, as the local read gives them
    want = _local(store, "tfrecord") + _local(store, "tfrecord.gz", compression_type="GZIP")
    random.seed(5)
    with Server(store) as srv:
        _inject_faults(srv, 7)
        urls = ["%s/bucket/%s" % (srv.url, n) for n in _names("tfrecord")]
        got = [bytes(x) for x in Dataset.tfrecord(urls).as_numpy_iterator()]
        got += [bytes(x) for x in Dataset.tfrecord([u + ".gz" for u in urls],
                                                   compression_type="GZIP")
                .as_numpy_iterator()]
        assert srv.resets >= 3 and srv.failed >= 2, (srv.resets, srv.failed)
    assert got == want


def test_retries_run_out_with_a_clear_error(store):
    with Server(store) as srv:
        srv.fail_next = 10 ** 6
        t0 = time.monotonic()
        with pytest.raises(sluice.InputOutputError) as e:
            list(Dataset.tfrecord(srv.url + "/bucket/" + _names("tfrecord")[0]))
        took = time.monotonic() - t0
        assert srv.requests == 8  # the default attempts
    msg = str(e.value)
    assert "HTTP 503" in msg and "SlowDown" in msg and "8 attempts" in msg, msg
    assert "/bucket/train/data-00000.tfrecord" in msg
    assert 0.5 < took < 30  # backed off, not hammered, not hung
    # the limits are options; the error policy takes the failure as it
    # takes a local read error
    with Server(store) as srv:
        srv.fail_next = 10 ** 6
        urls = ["%s/bucket/%s" % (srv.url, n) for n in _names("tfrecord")]
        ds = Dataset.tfrecord(urls).with_options(remote_max_attempts=3, error_policy="skip",
                                                 error_log_limit=0)
        it = ds.iterator()
        assert list(it) == []
        assert srv.requests == 9
        assert it.stats()["errors_skipped"] == 3


def test_object_replaced_between_ranges_is_an_error(store, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(os.path.join(store, "bucket"), root / "bucket")
    path = root / "bucket" / _names("tfrecord")[0]

    def replace(s, p, n):
        if n == 2:  # after the first range: a new version of the object
            data = path.read_bytes()
            path.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    with Server(str(root)) as srv:
        srv.on_request = replace
        with pytest.raises(sluice.InputOutputError) as e:
            list(Dataset.tfrecord(srv.url + "/bucket/" + _names("tfrecord")[0]))
    assert "changed while being read" in str(e.value) and "ETag" in str(e.value)


RESUME = r"""
import sys, sluice
from sluice import Dataset
urls, stop, state = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
ds = Dataset.tfrecord(urls)
it = ds.iterator()
if stop >= 0:
    for _ in range(stop):
        next(it)
    open(state, "wb").write(it.state())
    sys.exit(0)
else:
    it = ds.iterator(state=open(state, "rb").read())
for x in it:
    sys.stdout.write(bytes(x).hex() + "\n")
"""


def test_resume_mid_shard_in_a_new_process(store, tmp_path):
    want = _local(store, "tfrecord")
    state = str(tmp_path / "state")
    with Server(store) as srv:
        urls = ",".join("%s/bucket/%s" % (srv.url, n) for n in _names("tfrecord"))
        for stop in (175, -1):
            r = subprocess.run([sys.executable, "-c", RESUME, urls, str(stop), state],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
        sent = srv.bytes_sent
    got = [bytes.fromhex(l) for l in r.stdout.split()]
    assert got == want[175:]
    # the restore asked for the shard from the saved offset, not from 0
    assert sent < sum(os.path.getsize(os.path.join(store, "bucket", n))
                      for n in _names("tfrecord")) * 2


# ---- the local shard cache ----

def _cache_files(d):
    names = os.listdir(d) if os.path.isdir(d) else []
    return sorted(n for n in names if not n.startswith("."))


def test_cache_second_epoch_reads_nothing_remotely(store, tmp_path):
    want = _local(store, "tfrecord")
    cache = str(tmp_path / "cache")
    with Server(store) as srv:
        urls = ["%s/bucket/%s" % (srv.url, n) for n in _names("tfrecord")]
        ds = Dataset.tfrecord(urls).with_options(remote_cache_dir=cache)
        assert [bytes(x) for x in ds.as_numpy_iterator()] == want
        n, sent = srv.requests, srv.bytes_sent
        assert len(_cache_files(cache)) == 6  # 3 copies and their .meta
        for _ in range(2):
            it = ds.iterator()
            assert [bytes(x) for x in it] == want
        assert srv.requests == n and srv.bytes_sent == sent
        # a tar shard, whose reader stops before the archive's padding, and
        # a gzip file: both kept whole
        tars = Dataset.webdataset(srv.url + "/bucket/train/shard-{00000..00002}.tar")
        gz = Dataset.tfrecord([u + ".gz" for u in urls], compression_type="GZIP")
        for d in (tars, gz):
            first = [tuple(map(bytes, x)) if isinstance(x, tuple) else bytes(x)
                     for x in d.with_options(remote_cache_dir=cache).as_numpy_iterator()]
            n = srv.requests
            again = [tuple(map(bytes, x)) if isinstance(x, tuple) else bytes(x)
                     for x in d.with_options(remote_cache_dir=cache).as_numpy_iterator()]
            assert again == first and srv.requests == n
    for name in _cache_files(cache):
        if not name.endswith(".meta"):
            assert os.path.getsize(os.path.join(cache, name)) in {
                os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(store) for f in fs}


SHARE = r"""
import sys, sluice
from sluice import Dataset
urls, cache = sys.argv[1].split(","), sys.argv[2]
ds = Dataset.tfrecord(urls).with_options(remote_cache_dir=cache)
n = 0
for x in ds:
    n += 1
print(n)
"""


def test_cache_shared_by_processes(store, tmp_path):
    cache = str(tmp_path / "cache")
    with Server(store) as srv:
        srv.delay = 0.002
        urls = ",".join("%s/bucket/%s" % (srv.url, n) for n in _names("tfrecord"))
        procs = [subprocess.Popen([sys.executable, "-c", SHARE, urls, cache],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(3)]
        outs = [p.communicate(timeout=120) for p in procs]
        assert all(p.returncode == 0 for p in procs), outs
        assert [o.strip() for o, _ in outs] == ["390"] * 3
        n = srv.requests
        r = subprocess.run([sys.executable, "-c", SHARE, urls, cache], capture_output=True,
                           text=True, timeout=120)
        assert r.stdout.strip() == "390" and srv.requests == n  # all from the cache
    assert len(_cache_files(cache)) == 6
    assert not [f for f in os.listdir(cache) if f.startswith(".tmp")]


def test_cache_killed_writer_leaves_nothing_served(store, tmp_path):
    cache = str(tmp_path / "cache")
    want = _local(store, "tfrecord")
    with Server(store) as srv:
        srv.delay = 0.3  # slow: the writer is killed mid-shard
        urls = ",".join("%s/bucket/%s" % (srv.url, n) for n in _names("tfrecord"))
        p = subprocess.Popen([sys.executable, "-c", SHARE, urls, cache],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(200):
            if os.path.isdir(cache) and any(f.startswith(".tmp") for f in os.listdir(cache)):
                break
            time.sleep(0.05)
        time.sleep(0.4)
        p.kill()
        p.wait()
        assert [f for f in os.listdir(cache) if f.startswith(".tmp")]
        assert _cache_files(cache) == []  # nothing under a name that is served
        srv.delay = 0
        got = [bytes(x) for x in Dataset.tfrecord(urls.split(","))
               .with_options(remote_cache_dir=cache).as_numpy_iterator()]
    assert got == want
    # the dead writer's file went with the next copy's eviction pass
    assert not [f for f in os.listdir(cache) if f.startswith(".tmp")]
    assert len(_cache_files(cache)) == 6


def test_cache_evicts_least_recently_used(store, tmp_path):
    cache = str(tmp_path / "cache")
    sizes = [os.path.getsize(os.path.join(store, "bucket", n)) for n in _names("tfrecord")]
    with Server(store) as srv:
        urls = ["%s/bucket/%s" % (srv.url, n) for n in _names("tfrecord")]
        opts = dict(remote_cache_dir=cache, remote_cache_bytes=sizes[0] + max(sizes[1:]) + 1000)
        for u in urls[:2]:
            list(Dataset.tfrecord(u).with_options(**opts))
        time.sleep(0.05)
        list(Dataset.tfrecord(urls[0]).with_options(**opts))  # used again: newest
        n = srv.requests
        list(Dataset.tfrecord(urls[0]).with_options(**opts))
        assert srv.requests == n
        time.sleep(0.05)
        list(Dataset.tfrecord(urls[2]).with_options(**opts))  # evicts urls[1]
        total = sum(os.path.getsize(os.path.join(cache, f)) for f in _cache_files(cache)
                    if not f.endswith(".meta"))
        assert total <= opts["remote_cache_bytes"]
        n = srv.requests
        list(Dataset.tfrecord(urls[0]).with_options(**opts))
        list(Dataset.tfrecord(urls[2]).with_options(**opts))
        assert srv.requests == n  # both still cached
        list(Dataset.tfrecord(urls[1]).with_options(**opts))
        assert srv.requests > n  # gone: fetched again


# ---- s3rver (npm), a third-party S3 implementation ----

def _s3rver_exe():
    src = os.environ.get("SLUICE_SOURCE_DIR") or os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    exe = os.environ.get("SLUICE_S3RVER") or os.path.join(
        src, "build-node", "node_modules", ".bin", "s3rver")
    return exe if os.path.exists(exe) and shutil.which("node") else None


@pytest.fixture(scope="module")
def s3rver(store, tmp_path_factory):
    exe = _s3rver_exe()
    if not exe:
        pytest.skip("s3rver is not installed (node and npm; ./test.sh runs npm install s3rver "
                    "into build-node/)")
    d = tmp_path_factory.mktemp("s3rver")
    port = _free_port()
    p = subprocess.Popen([exe, "-d", str(d), "-a", "127.0.0.1", "-p", str(port), "-s",
                          "--configure-bucket", "bucket", "--no-vhost-buckets"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_tool_env())
    url = "http://127.0.0.1:%d" % port
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            if p.poll() is not None:
                pytest.fail("s3rver exited: %s" % p.stderr.read().decode())
            time.sleep(0.05)
    # the shards, uploaded with signed PUTs (s3rver's keys are S3RVER/S3RVER)
    base = os.path.join(store, "bucket")
    for dirpath, _, files in os.walk(base):
        for f in files:
            full = os.path.join(dirpath, f)
            with open(full, "rb") as fh:
                put_object(url, "bucket", os.path.relpath(full, base), fh.read(),
                           "S3RVER", "S3RVER")
    yield url
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()


def test_s3rver_listing_ranges_and_signatures(store, s3rver, aws_env, tmp_path):
    aws_env.setenv("AWS_ENDPOINT_URL_S3", s3rver)
    aws_env.setenv("AWS_ACCESS_KEY_ID", "S3RVER")
    aws_env.setenv("AWS_SECRET_ACCESS_KEY", "S3RVER")
    files = Dataset.list_files("s3://bucket/train/data-*.tfrecord", shuffle=False)
    assert [x.decode() for x in files.as_numpy_iterator()] == \
        ["s3://bucket/" + n for n in _names("tfrecord")]
    recs = [bytes(x) for x in Dataset.tfrecord(files).as_numpy_iterator()]
    assert recs == _local(store, "tfrecord")
    tars = Dataset.webdataset(Dataset.list_files("s3://bucket/train/shard-*.tar", shuffle=False))
    assert len(list(tars)) == 120
    # s3rver knows its access keys (not its secrets: the store of the
    # test's own checks signatures)
    # by record and by block, ranged GETs signed
    shards = ["s3://bucket/" + n for n in _names("tfrecord")]
    local = Dataset.tfrecord_indexed(_copies(store, "tfrecord", tmp_path))
    assert _shuffled(Dataset.tfrecord_indexed(shards)) == _shuffled(local)
    assert [bytes(x) for x in Dataset.tfrecord_indexed(shards)
            .shuffle_windowed(16, 2, seed=3).as_numpy_iterator()] == \
        [bytes(x) for x in local.shuffle_windowed(16, 2, seed=3).as_numpy_iterator()]
    aws_env.setenv("AWS_ACCESS_KEY_ID", "NOSUCHKEY")
    with pytest.raises(sluice.PermissionDeniedError) as e:
        list(Dataset.tfrecord("s3://bucket/" + _names("tfrecord")[0]))
    assert "InvalidAccessKeyId" in str(e.value) and "NOSUCHKEY" not in str(e.value)


# ---- nginx, over HTTP and HTTPS ----

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def nginx(store, tmp_path_factory):
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx")
                                    else None)
    if not exe or not shutil.which("openssl"):
        pytest.skip("nginx or openssl is not installed (nginx-light, openssl)")
    d = tmp_path_factory.mktemp("nginx")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
                   check=True, capture_output=True, env=_tool_env())
    http, https = _free_port(), _free_port()
    # as root, nginx's workers would drop to nobody, who cannot read the
    # test's private temporary folders
    (d / "nginx.conf").write_text(("user root;\n" if os.geteuid() == 0 else "") + """
daemon off;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log;
events {}
http {
    access_log off;
    client_body_temp_path %(d)s/body;
    proxy_temp_path %(d)s/proxy;
    fastcgi_temp_path %(d)s/fastcgi;
    uwsgi_temp_path %(d)s/uwsgi;
    scgi_temp_path %(d)s/scgi;
    keepalive_requests 10000;
    server {
        listen 127.0.0.1:%(http)d;
        listen 127.0.0.1:%(https)d ssl;
        ssl_certificate %(d)s/cert.pem;
        ssl_certificate_key %(d)s/key.pem;
        root %(root)s;
    }
}
""" % {"d": d, "http": http, "https": https, "root": store})
    p = subprocess.Popen([exe, "-c", str(d / "nginx.conf"), "-p", str(d)],
                         stderr=subprocess.PIPE, env=_tool_env())
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", https), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        p.kill()
        pytest.fail("nginx did not start: %s" % p.stderr.read().decode())
    yield {"http": "http://127.0.0.1:%d" % http, "https": "https://127.0.0.1:%d" % https,
           "ca": str(d / "cert.pem")}
    p.send_signal(signal.SIGQUIT)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()


def _copies(store, kind, tmp_path):
    """The store's shards of a kind copied under tmp_path, so that indexes
    built beside them stay out of the store the servers serve."""
    d = tmp_path / ("copies-" + kind)
    d.mkdir(exist_ok=True)
    names = _names("tfrecord") if kind == "tfrecord" else \
        ["train/shard-%05d.tar" % i for i in range(3)]
    out = []
    for n in names:
        shutil.copy(os.path.join(store, "bucket", n), d / os.path.basename(n))
        out.append(str(d / os.path.basename(n)))
    return out


def _shuffled(ds):
    return [repr(x) for x in ds.shuffle(sluice.ALL, seed=11).as_numpy_iterator()]


def test_nginx_http_and_https(store, nginx, monkeypatch, tmp_path):
    want = _local(store, "tfrecord")
    urls = ["%s/bucket/%s" % (nginx["http"], n) for n in _names("tfrecord")]
    assert [bytes(x) for x in Dataset.tfrecord(urls).as_numpy_iterator()] == want
    tls = ["%s/bucket/%s" % (nginx["https"], n) for n in _names("tfrecord")]
    # a self-signed certificate is refused until it is named as the CA
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    with pytest.raises(sluice.InputOutputError) as e:
        list(Dataset.tfrecord(tls[:1]))
    assert "certificate" in str(e.value).lower()
    monkeypatch.setenv("SSL_CERT_FILE", nginx["ca"])
    assert [bytes(x) for x in Dataset.tfrecord(tls).as_numpy_iterator()] == want
    tars = nginx["https"] + "/bucket/train/shard-{00000..00002}.tar"
    assert len(list(Dataset.webdataset(tars))) == 120
    # by record: no index beside the shards, so each is streamed once to
    # build one, then every record is a ranged GET of its own
    assert _shuffled(Dataset.tfrecord_indexed(tls)) == \
        _shuffled(Dataset.tfrecord_indexed(_copies(store, "tfrecord", tmp_path)))
    wds = [nginx["http"] + "/bucket/train/shard-%05d.tar" % i for i in range(3)]
    assert _shuffled(Dataset.webdataset_indexed(wds)) == \
        _shuffled(Dataset.webdataset_indexed(_copies(store, "tar", tmp_path)))


@pytest.fixture
def indexed_store(store, tmp_path):
    """A bucket of its own (indexes appear beside the shards): the store's
    three TFRecord and three tar shards."""
    d = tmp_path / "bucket" / "idx"
    d.mkdir(parents=True)
    for i in range(3):
        for name in ("data-%05d.tfrecord" % i, "shard-%05d.tar" % i):
            shutil.copy(os.path.join(store, "bucket", "train", name), d / name)
    return str(tmp_path)


def _idx_names(kind):
    return ["idx/%s-%05d.%s" % ("data" if kind == "tfrecord" else "shard", i, kind)
            for i in range(3)]


def test_indexed_over_http_reads_only_the_records_taken(indexed_store):
    root = indexed_store
    local = {k: [os.path.join(root, "bucket", n) for n in _idx_names(k)]
             for k in ("tfrecord", "tar")}
    want = [bytes(x) for x in Dataset.tfrecord(local["tfrecord"]).as_numpy_iterator()]
    with Server(root) as srv:
        urls = {k: ["%s/bucket/%s" % (srv.url, n) for n in _idx_names(k)]
                for k in ("tfrecord", "tar")}
        # no index beside the shards: each is streamed once to build it
        got = [bytes(x) for x in Dataset.tfrecord_indexed(urls["tfrecord"]).as_numpy_iterator()]
        assert got == want
        # indexes beside them (written by the local build): only ranges now
        Dataset.tfrecord_indexed(local["tfrecord"])
        Dataset.webdataset_indexed(local["tar"])
        srv.bytes_of.clear()
        srv.paths.clear()
        ds = Dataset.tfrecord_indexed(urls["tfrecord"]).shuffle(sluice.ALL, seed=4).take(25)
        got = [bytes(x) for x in ds.as_numpy_iterator()]
        mine = Dataset.tfrecord_indexed(local["tfrecord"]).shuffle(sluice.ALL, seed=4).take(25)
        assert got == [bytes(x) for x in mine.as_numpy_iterator()]
        records = sum(len(r) + 16 for r in got)
        shard_bytes = srv.shard_bytes()
        assert records <= shard_bytes <= 1.5 * records, (records, shard_bytes)
        assert sum(1 for p in srv.paths if not p.endswith(".idx")) == 25
        # tar samples: one range each, the sample's headers and members
        srv.bytes_of.clear()
        ds = Dataset.webdataset_indexed(urls["tar"], keys=("jpg", "cls"), with_keys=True)
        got = list(ds.shuffle(sluice.ALL, seed=2).take(12).as_numpy_iterator())
        mine = Dataset.webdataset_indexed(local["tar"], keys=("jpg", "cls"), with_keys=True)
        assert [(bytes(a), int(b), k) for a, b, k in got] == \
            [(bytes(a), int(b), k) for a, b, k in
             mine.shuffle(sluice.ALL, seed=2).take(12).as_numpy_iterator()]
        payload = sum(len(a) + 2 for a, _, _ in got)
        shard_bytes = srv.shard_bytes()
        # headers: 512 per member and padding to 512
        assert shard_bytes <= 1.5 * payload + 12 * 4 * 512, (payload, shard_bytes)


def test_indexed_over_http_faults_lose_and_repeat_nothing(indexed_store):
    root = indexed_store
    local = [os.path.join(root, "bucket", n) for n in _idx_names("tfrecord")]
    want = [bytes(x) for x in Dataset.tfrecord_indexed(local).shuffle(sluice.ALL, seed=8)
            .as_numpy_iterator()]
    random.seed(7)
    with Server(root) as srv:
        _inject_faults(srv, 11)
        urls = ["%s/bucket/%s" % (srv.url, n) for n in _idx_names("tfrecord")]
        got = [bytes(x) for x in Dataset.tfrecord_indexed(urls).shuffle(sluice.ALL, seed=8)
               .as_numpy_iterator()]
        assert srv.resets >= 3 and srv.failed >= 2, (srv.resets, srv.failed)
    assert got == want


def test_indexed_over_http_missing_and_changed(indexed_store):
    root = indexed_store
    local = [os.path.join(root, "bucket", n) for n in _idx_names("tfrecord")]
    Dataset.tfrecord_indexed(local)  # indexes beside
    with Server(root) as srv:
        urls = ["%s/bucket/%s" % (srv.url, n) for n in _idx_names("tfrecord")]
        with pytest.raises(sluice.NotFoundError, match=r"nope\.tfrecord"):
            Dataset.tfrecord_indexed(urls[:2] + [srv.url + "/bucket/idx/nope.tfrecord"])
        with pytest.raises(sluice.NotFoundError, match=r"nope\.idx"):
            Dataset.tfrecord_indexed(urls, [None, None, srv.url + "/bucket/idx/nope.idx"])
        # a shard cut short after it was indexed: its last records fail,
        # naming the URL, and the skip policy goes past them
        with open(local[2], "r+b") as f:
            f.truncate(os.path.getsize(local[2]) - 100)
        ds = Dataset.tfrecord_indexed(urls)
        with pytest.raises(sluice.Error, match=r"data-00002\.tfrecord"):
            list(ds)
        n = sum(1 for _ in ds.with_options(error_policy="skip"))
        assert n == 389


def test_windowed_order_over_http_fetches_blocks(indexed_store):
    # shuffle_windowed over URL shards: each block of records is one GET
    # (the records of a window copied out of their blocks), and the order
    # is the local one
    root = indexed_store
    local = [os.path.join(root, "bucket", n) for n in _idx_names("tfrecord")]
    Dataset.tfrecord_indexed(local)  # indexes beside
    want = [bytes(x) for x in Dataset.tfrecord_indexed(local)
            .shuffle_windowed(20, 3, seed=5).as_numpy_iterator()]
    with Server(root) as srv:
        urls = ["%s/bucket/%s" % (srv.url, n) for n in _idx_names("tfrecord")]
        srv.paths.clear()
        srv.bytes_of.clear()
        got = [bytes(x) for x in Dataset.tfrecord_indexed(urls)
               .shuffle_windowed(20, 3, seed=5).as_numpy_iterator()]
        gets = [p for p in srv.paths if not p.endswith(".idx")]
        shard_bytes = srv.shard_bytes()
    assert got == want
    # 390 records in blocks of 20 (a block across two shards is two spans)
    assert 20 <= len(gets) <= 24, len(gets)
    total = sum(os.path.getsize(f) for f in local)
    assert total <= shard_bytes <= 1.05 * total, (total, shard_bytes)
    # under faults too
    random.seed(3)
    with Server(root) as srv:
        _inject_faults(srv, 5)
        urls = ["%s/bucket/%s" % (srv.url, n) for n in _idx_names("tfrecord")]
        got = [bytes(x) for x in Dataset.tfrecord_indexed(urls)
               .shuffle_windowed(20, 3, seed=5).as_numpy_iterator()]
    assert got == want
    # a window of more blocks than the read keeps: some are fetched again,
    # and nothing is lost
    want = [bytes(x) for x in Dataset.tfrecord_indexed(local)
            .shuffle_windowed(2, 150, seed=1).as_numpy_iterator()]
    with Server(root) as srv:
        urls = ["%s/bucket/%s" % (srv.url, n) for n in _idx_names("tfrecord")]
        got = [bytes(x) for x in Dataset.tfrecord_indexed(urls)
               .shuffle_windowed(2, 150, seed=1).as_numpy_iterator()]
        assert len([p for p in srv.paths if not p.endswith(".idx")]) >= 196
    assert got == want


def test_index_of_a_url_shard_kept_on_local_disk(indexed_store, tmp_path, monkeypatch):
    # no index beside the shards: the first dataset streams each to build
    # one and keeps it (SLUICE_INDEX_CACHE); the next asks each shard one
    # byte to check it is unchanged; a replaced shard is indexed again
    root = indexed_store
    monkeypatch.setenv("SLUICE_INDEX_CACHE", str(tmp_path / "indexes"))
    with Server(root) as srv:
        urls = ["%s/bucket/%s" % (srv.url, n) for n in _idx_names("tfrecord")]
        n = Dataset.tfrecord_indexed(urls).cardinality()
        total = sum(os.path.getsize(os.path.join(root, "bucket", p))
                    for p in _idx_names("tfrecord"))
        assert srv.shard_bytes() >= total
        assert len(os.listdir(tmp_path / "indexes")) == 6  # an index and its meta each
        srv.bytes_of.clear()
        assert Dataset.tfrecord_indexed(urls).cardinality() == n
        assert srv.shard_bytes() == 3
        with open(os.path.join(root, "bucket", _idx_names("tfrecord")[1]), "ab") as f:
            f.write(frame(b"one more"))
        ds = Dataset.tfrecord_indexed(urls)
        assert ds.cardinality() == n + 1
        assert bytes(list(ds.skip(260).take(1).as_numpy_iterator())[0]) == b"one more"
