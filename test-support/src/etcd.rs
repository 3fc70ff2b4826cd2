//! A throwaway etcd for a test: one member on free loopback ports with its
//! data in a temp dir, killed (by its own pid) and the dir removed when the
//! handle drops, also on panic. For the tests of bosun's etcd store and
//! the e2e tests run with `BOSUN_TEST_STORE=etcd`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::process::dies_with_test;

/// etcd's periodic watch progress notifications every second (its default
/// is ten minutes).
const PROGRESS_NOTIFY: &str = "--experimental-watch-progress-notify-interval=1s";

pub struct Etcd {
    // Dropped in this order: the process, then its data dir.
    child: Child,
    dir: tempfile::TempDir,
    client_port: u16,
    /// Where `/health` answers over plain HTTP: the client port, or for a
    /// member serving TLS its metrics port.
    health_port: u16,
}

/// A member's TLS: it serves with `cert`/`key` and requires every client
/// to present a certificate of `ca` (etcd's `--client-cert-auth`).
#[derive(Debug, Clone)]
pub struct MemberTls {
    pub ca: std::path::PathBuf,
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

/// Whether Debian's etcd-server is installed (scripts/test.sh installs it).
pub fn installed() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join("etcd").is_file()))
}

/// Whether the e2e tests run their control planes on etcd
/// (`BOSUN_TEST_STORE=etcd`) instead of the embedded store.
pub fn store_is_etcd() -> bool {
    match std::env::var("BOSUN_TEST_STORE").as_deref() {
        Ok("etcd") => true,
        Ok("") | Ok("embedded") | Err(_) => false,
        Ok(other) => panic!("BOSUN_TEST_STORE={other:?}: use etcd or embedded"),
    }
}

/// A throwaway etcd for a test's control plane when the e2e tests run on
/// etcd (`BOSUN_TEST_STORE=etcd`), None on the embedded store. Panics when
/// etcd is asked for but not installed: a run on etcd that silently ran on
/// the embedded store would show nothing.
pub fn for_test_store() -> Option<Etcd> {
    store_is_etcd()
        .then(|| Etcd::start().expect("BOSUN_TEST_STORE=etcd, but etcd is not installed"))
}

/// A loopback port nobody listens on now (there is a small race, retried
/// by [`Etcd::start`]).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Etcd {
    /// Starts a member and waits until it is healthy; None, with the
    /// reason printed, when etcd is not installed.
    pub fn start() -> Option<Etcd> {
        if !installed() {
            eprintln!("skipping: etcd is not installed (apt-get install -y etcd-server)");
            return None;
        }
        Some(Self::start_with(None))
    }

    /// A member that serves only TLS and requires client certificates of
    /// `tls.ca`; None, with the reason printed, when etcd is not installed.
    pub fn start_tls(tls: &MemberTls) -> Option<Etcd> {
        if !installed() {
            eprintln!("skipping: etcd is not installed (apt-get install -y etcd-server)");
            return None;
        }
        Some(Self::start_with(Some(tls)))
    }

    fn start_with(tls: Option<&MemberTls>) -> Etcd {
        let mut last = String::new();
        for _ in 0..3 {
            match Self::try_start(tls) {
                Ok(etcd) => return etcd,
                Err(e) => last = e,
            }
        }
        panic!("etcd did not start: {last}");
    }

    fn try_start(tls: Option<&MemberTls>) -> Result<Etcd, String> {
        let dir = tempfile::Builder::new()
            .prefix("bosun-test-etcd.")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let (client_port, peer_port) = (free_port(), free_port());
        let scheme = if tls.is_some() { "https" } else { "http" };
        let client = format!("{scheme}://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let log = std::fs::File::create(dir.path().join("etcd.log")).map_err(|e| e.to_string())?;
        let mut command = dies_with_test("etcd");
        let mut health_port = client_port;
        if let Some(tls) = tls {
            health_port = free_port();
            command
                .arg(format!("--trusted-ca-file={}", tls.ca.display()))
                .arg(format!("--cert-file={}", tls.cert.display()))
                .arg(format!("--key-file={}", tls.key.display()))
                .arg("--client-cert-auth")
                .arg(format!(
                    "--listen-metrics-urls=http://127.0.0.1:{health_port}"
                ));
        }
        let child = command
            .arg("--name=test")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=test={peer}"))
            .arg("--log-level=warn")
            .arg("--logger=zap")
            // Periodic progress notifications (in order with events on
            // every etcd, unlike requested ones before 3.4.31): what
            // moves an idle watch's bookmarks on this etcd.
            .arg(PROGRESS_NOTIFY)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting etcd: {e}"))?;
        let mut etcd = Etcd {
            child,
            dir,
            client_port,
            health_port,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = etcd.child.try_wait() {
                return Err(format!("etcd exited ({status}): {}", etcd.log()));
            }
            if etcd.healthy() {
                return Ok(etcd);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!("etcd not healthy after 30 s: {}", etcd.log()))
    }

    /// etcd's `/health` says so.
    fn healthy(&self) -> bool {
        let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.health_port)) else {
            return false;
        };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        if conn
            .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut out = String::new();
        let _ = conn.read_to_string(&mut out);
        out.contains("\"health\":\"true\"")
    }

    /// Compacts the member's history up to `revision` (through etcd's
    /// HTTP gateway, as `etcdctl compact` would): reads and watches from
    /// before it fail from then on.
    pub fn compact(&self, revision: u64) {
        let body = format!("{{\"revision\":\"{revision}\",\"physical\":true}}");
        let mut conn = TcpStream::connect(("127.0.0.1", self.client_port)).expect("reaching etcd");
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("a timeout");
        write!(
            conn,
            "POST /v3/kv/compaction HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("asking etcd to compact");
        let mut out = String::new();
        let _ = conn.read_to_string(&mut out);
        assert!(
            out.starts_with("HTTP/1.0 200") || out.contains("required revision has been compacted"),
            "compacting etcd to {revision}: {out}"
        );
    }

    /// `HOST:PORT` of the member.
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// `--store` for bosun-control.
    pub fn store_url(&self) -> String {
        format!("etcd://{}", self.endpoint())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn log(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
        crate::text::tail(&log, 20)
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A throwaway etcd cluster of several members on free loopback ports,
/// their data in one temp dir; every member is killed (by its own pid)
/// and the dir removed when the handle drops, also on panic.
pub struct EtcdCluster {
    // Dropped in this order: the processes, then their data dir.
    members: Vec<Option<Child>>,
    client_ports: Vec<u16>,
    dir: tempfile::TempDir,
}

impl EtcdCluster {
    /// Starts `n` members and waits until every one is healthy; None, with
    /// the reason printed, when etcd is not installed.
    pub fn start(n: usize) -> Option<EtcdCluster> {
        if !installed() {
            eprintln!("skipping: etcd is not installed (apt-get install -y etcd-server)");
            return None;
        }
        let mut last = String::new();
        for _ in 0..3 {
            match Self::try_start(n) {
                Ok(cluster) => return Some(cluster),
                Err(e) => last = e,
            }
        }
        panic!("the etcd cluster did not start: {last}");
    }

    fn try_start(n: usize) -> Result<EtcdCluster, String> {
        let dir = tempfile::Builder::new()
            .prefix("bosun-test-etcd-cluster.")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect();
        let token = format!("bosun-test-{}", std::process::id());
        let mut cluster = EtcdCluster {
            members: Vec::new(),
            client_ports: ports.iter().map(|(c, _)| *c).collect(),
            dir,
        };
        for (i, (client, peer)) in ports.iter().enumerate() {
            let client = format!("http://127.0.0.1:{client}");
            let peer = format!("http://127.0.0.1:{peer}");
            let log = std::fs::File::create(cluster.dir.path().join(format!("m{i}.log")))
                .map_err(|e| e.to_string())?;
            let child = dies_with_test("etcd")
                .arg(format!("--name=m{i}"))
                .arg(format!(
                    "--data-dir={}",
                    cluster.dir.path().join(format!("m{i}")).display()
                ))
                .arg(format!("--listen-client-urls={client}"))
                .arg(format!("--advertise-client-urls={client}"))
                .arg(format!("--listen-peer-urls={peer}"))
                .arg(format!("--initial-advertise-peer-urls={peer}"))
                .arg(format!("--initial-cluster={}", initial.join(",")))
                .arg(format!("--initial-cluster-token={token}"))
                .arg("--initial-cluster-state=new")
                .arg("--log-level=warn")
                .arg("--logger=zap")
                .arg(PROGRESS_NOTIFY)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .map_err(|e| format!("starting etcd: {e}"))?;
            cluster.members.push(Some(child));
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            for m in cluster.members.iter_mut().flatten() {
                if let Ok(Some(status)) = m.try_wait() {
                    return Err(format!("an etcd member exited ({status})"));
                }
            }
            if (0..n).all(|i| cluster.healthy(i)) {
                return Ok(cluster);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err("the etcd cluster was not healthy after 60 s".into())
    }

    /// Member `i`'s `/health` says so (it has a leader and answers).
    pub fn healthy(&self, i: usize) -> bool {
        let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.client_ports[i])) else {
            return false;
        };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        if conn
            .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut out = String::new();
        let _ = conn.read_to_string(&mut out);
        out.contains("\"health\":\"true\"")
    }

    /// The member that is raft's leader now, as the members' status says
    /// (etcd's HTTP gateway, `etcdctl endpoint status`): the one whose own
    /// id is the leader id it reports.
    pub fn leader(&self) -> Option<usize> {
        (0..self.client_ports.len()).find(|&i| {
            if self.members[i].is_none() {
                return false;
            }
            let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.client_ports[i])) else {
                return false;
            };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
            let body = "{}";
            if write!(
                conn,
                "POST /v3/maintenance/status HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .is_err()
            {
                return false;
            }
            let mut out = String::new();
            let _ = conn.read_to_string(&mut out);
            let field = |name: &str| {
                let at = out.find(&format!("\"{name}\":\""))? + name.len() + 4;
                out[at..].split('"').next().map(str::to_string)
            };
            matches!((field("member_id"), field("leader")), (Some(me), Some(leader)) if me == leader)
        })
    }

    /// `--store` for bosun-control: every member.
    pub fn store_url(&self) -> String {
        let endpoints: Vec<String> = self
            .client_ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("etcd://{}", endpoints.join(","))
    }

    /// Kills member `i` with SIGKILL.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}
