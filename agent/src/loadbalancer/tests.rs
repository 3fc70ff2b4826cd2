use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn quick() -> Options {
    Options {
        dial_timeout: Duration::from_secs(2),
        health_interval: Duration::from_millis(100),
        failures_to_down: 2,
    }
}

/// A listener on a free loopback port, and its address.
async fn named_server() -> (TcpListener, String) {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    (listener, address)
}

/// Answers each connection with `name`, then echoes.
fn serve(listener: TcpListener, name: &'static str) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                conn.write_all(name.as_bytes()).await.unwrap();
                let mut buf = [0u8; 64];
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 || conn.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    })
}

/// Connects through the load balancer and reads the server's name.
async fn who_answers(lb: &LoadBalancer) -> String {
    let mut conn = TcpStream::connect(lb.local_addr()).await.unwrap();
    let mut buf = [0u8; 1];
    conn.read_exact(&mut buf).await.unwrap();
    String::from_utf8(buf.to_vec()).unwrap()
}

#[tokio::test]
async fn new_connections_go_to_a_live_server_when_the_preferred_one_is_gone() {
    let (a, a_addr) = named_server().await;
    let (b, b_addr) = named_server().await;
    let a_task = serve(a, "a");
    let _b_task = serve(b, "b");
    let lb = LoadBalancer::start(vec![a_addr.clone(), b_addr.clone()], quick())
        .await
        .unwrap();
    assert_eq!(who_answers(&lb).await, "a");
    // A stops listening (its process killed): its port refuses.
    a_task.abort();
    let _ = a_task.await;
    assert_eq!(who_answers(&lb).await, "b");
    assert_eq!(lb.current(), b_addr);
    // Sticky: B stays the one even after A would answer again.
    let again = TcpListener::bind(&a_addr).await.unwrap();
    let _a_again = serve(again, "a");
    assert_eq!(who_answers(&lb).await, "b");
}

#[tokio::test]
async fn open_connections_to_a_server_failing_health_checks_are_closed() {
    let (a, a_addr) = named_server().await;
    let (b, b_addr) = named_server().await;
    let _b_task = serve(b, "b");
    let lb = LoadBalancer::start(vec![a_addr, b_addr], quick())
        .await
        .unwrap();
    // A accepts one connection and keeps it open but takes no new ones, as
    // a host that went away leaves a connection hanging.
    let held = tokio::spawn(async move {
        let (conn, _) = a.accept().await.unwrap();
        drop(a);
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(conn);
    });
    let mut conn = TcpStream::connect(lb.local_addr()).await.unwrap();
    let mut buf = [0u8; 8];
    let read = tokio::time::timeout(Duration::from_secs(20), conn.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "the connection to the server that stopped answering was not closed: {read:?}"
    );
    assert_eq!(who_answers(&lb).await, "b");
    held.abort();
}

#[tokio::test]
async fn a_connection_is_closed_when_no_server_answers() {
    let (a, a_addr) = named_server().await;
    drop(a);
    let lb = LoadBalancer::start(vec![a_addr], quick()).await.unwrap();
    let mut conn = TcpStream::connect(lb.local_addr()).await.unwrap();
    let mut buf = [0u8; 8];
    let read = tokio::time::timeout(Duration::from_secs(20), conn.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
}

#[test]
fn server_urls_become_addresses() {
    assert_eq!(
        server_address("https://10.0.0.5:6443").unwrap(),
        "10.0.0.5:6443"
    );
    assert_eq!(
        server_address("https://cp.example:6443/").unwrap(),
        "cp.example:6443"
    );
    assert_eq!(server_address("https://[::1]:6443").unwrap(), "[::1]:6443");
    assert_eq!(
        server_address("https://cp.example").unwrap(),
        "cp.example:443"
    );
    let err = server_address("http://10.0.0.5:6443").unwrap_err();
    assert!(err.contains("expected https://HOST:PORT"), "{err}");
    let err = server_address("https://10.0.0.5:6443/k8s").unwrap_err();
    assert!(err.contains("no path"), "{err}");
}
