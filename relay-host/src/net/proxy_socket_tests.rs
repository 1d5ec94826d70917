//! The proxy run on a socket of a temporary folder (no port, no name resolved): what a caller
//! sees of a refusal, and what dropping it leaves.

use std::sync::Mutex;

use super::*;

/// A proxy on `dir/p.sock` allowing `api.anthropic.com:443`, and the refusals it reported.
fn started(dir: &Path) -> (Proxy, Arc<Mutex<Vec<Denied>>>) {
    let list = AllowList::parse(&["api.anthropic.com:443".to_string()]).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let on_deny: OnDeny = Box::new(move |d| log.lock().unwrap().push(d.clone()));
    let proxy = Proxy::start_with(&dir.join("p.sock"), list, on_deny, None).unwrap();
    (proxy, seen)
}

#[test]
fn a_host_off_the_list_is_answered_403_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (proxy, seen) = started(dir.path());
    let mut client = UnixStream::connect(dir.path().join("p.sock")).unwrap();
    client
        .write_all(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("example.com:443 refused"), "{answer}");
    let want = Denied {
        host: "example.com".into(),
        port: 443,
        reason: "not on the allow-list",
    };
    assert_eq!(*seen.lock().unwrap(), [want]);
    drop(proxy);
}

#[test]
fn a_dropped_proxy_removes_its_socket_and_takes_no_connection() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("p.sock");
    let (proxy, _seen) = started(dir.path());
    assert!(sock.exists());
    drop(proxy);
    assert!(!sock.exists());
    assert!(UnixStream::connect(&sock).is_err());
}

#[test]
fn a_socket_path_that_exists_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.sock"), "").unwrap();
    let list = AllowList::parse(&[]).unwrap();
    let got = Proxy::start_with(&dir.path().join("p.sock"), list, Box::new(|_| {}), None);
    assert_eq!(got.unwrap_err().kind(), io::ErrorKind::AddrInUse);
}
