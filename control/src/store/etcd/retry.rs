//! Which failed etcd requests are sent again, and how: a request that
//! reached no member (any request), and a read whose member died with it
//! in flight or whose leader changed while it waited (reads change
//! nothing, so sending one twice is harmless). A write whose member may
//! have received it is never sent again: its outcome is unknown, and the
//! API server says so, as kube-apiserver does.

use std::time::Duration;

/// Whether `e` failed before reaching any member: the client's balanced
/// channel keeps sending to a member that is down (connection refused),
/// so such a request, never received, is sent again and goes to another.
fn unreached(e: &etcd_client::Error) -> bool {
    e.to_string().contains("tcp connect error")
}

/// Whether a read failed because its member went away while it was in
/// flight (the connection reset or closed under it).
fn lost_in_flight(e: &etcd_client::Error) -> bool {
    e.to_string().contains("transport error")
}

/// Whether a linearizable read failed because its member's leader
/// changed while it waited for the read index (etcd's "leader changed",
/// returned before anything is read or applied): a read sent again goes
/// to the new leader's term. This happens when a member dies and the
/// survivors elect a new leader, which takes about one election timeout.
fn leader_changed(e: &etcd_client::Error) -> bool {
    e.to_string().contains("etcdserver: leader changed")
}

/// How often a request that reached no member is sent again.
const UNREACHED_TRIES: usize = 8;

/// How long a read keeps being sent again while the members elect a new
/// leader: several of etcd's default 1 s election timeouts, for a loaded
/// machine.
const ELECTION_WAIT: Duration = Duration::from_secs(5);

/// `request` until it reaches a member (see [`unreached`]): for writes,
/// which are sent again only when they cannot have been received.
pub(in crate::store) async fn reaching<T, F, Fut>(
    request: F,
) -> std::result::Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
{
    retrying(unreached, request).await
}

/// `request`, a read, until it is answered: sent again also when its
/// member died with it in flight, and while a new leader is elected (a
/// read changes nothing, so sending it twice is harmless).
pub(in crate::store) async fn reading<T, F, Fut>(
    mut request: F,
) -> std::result::Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
{
    let started = tokio::time::Instant::now();
    loop {
        match retrying(|e| unreached(e) || lost_in_flight(e), &mut request).await {
            Err(e) if leader_changed(&e) && started.elapsed() < ELECTION_WAIT => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

async fn retrying<T, F, Fut>(
    again: fn(&etcd_client::Error) -> bool,
    mut request: F,
) -> std::result::Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
{
    let mut tries = 0;
    loop {
        match request().await {
            Err(e) if again(&e) && tries + 1 < UNREACHED_TRIES => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}
