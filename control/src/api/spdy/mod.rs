//! `pods/exec` and `pods/attach` over SPDY/3.1, the upgrade kubectl falls
//! back to (and older clients always use), translated to the agent's
//! WebSocket channel protocol.
//!
//! - Negotiation, as k8s.io/apimachinery's httpstream handshake: the
//!   client sends `Upgrade: SPDY/3.1` and one `X-Stream-Protocol-Version`
//!   per protocol it speaks; the server picks the first it also speaks
//!   (`v4.channel.k8s.io`, `v3.channel.k8s.io`, `v2.channel.k8s.io`),
//!   answers 101 with the choice, or 403 when there is none.
//! - Streams: after the upgrade the client opens one SPDY stream per
//!   channel, typed by its `streamType` header (`error`, `stdin`,
//!   `stdout`, `stderr`, `resize`); the server replies to each and, as
//!   the kubelet, starts once every stream the request's flags call for is
//!   there.
//! - [`frame`] is the wire format; [`remotecommand`] the translation.
//! - `pods/portforward` speaks `portforward.k8s.io` instead, plainly
//!   upgraded or tunnelled through a WebSocket: [`portforward`] and
//!   [`tunnel`].
//!
//! Flow control is as moby/spdystream does it, which is what kubectl
//! uses: WINDOW_UPDATE and SETTINGS are read and ignored, and none is
//! sent.

mod dictionary;
#[cfg(test)]
mod fake_kubectl;
pub mod frame;
pub mod portforward;
pub mod remotecommand;
pub mod tunnel;

use http::HeaderMap;

/// The `Upgrade` token of SPDY/3.1.
pub const UPGRADE: &str = "SPDY/3.1";
/// The header carrying the offered and the chosen stream protocol.
pub const PROTOCOL_HEADER: &str = "X-Stream-Protocol-Version";

/// The remote command protocols served over SPDY, preferred first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The error stream carries a `Status` JSON (with the exit code);
    /// resize stream.
    V4,
    /// The error stream carries a message; resize stream.
    V3,
    /// The error stream carries a message; no resize.
    V2,
}

impl Protocol {
    pub const SERVED: [Protocol; 3] = [Protocol::V4, Protocol::V3, Protocol::V2];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::V4 => "v4.channel.k8s.io",
            Protocol::V3 => "v3.channel.k8s.io",
            Protocol::V2 => "v2.channel.k8s.io",
        }
    }
}

/// Whether a request asks to upgrade to SPDY/3.1.
pub fn wants_spdy(headers: &HeaderMap) -> bool {
    headers
        .get_all(http::header::UPGRADE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|p| p.trim().eq_ignore_ascii_case(UPGRADE)))
}

/// The protocol to speak: the client's first offer that is served.
/// The error names both lists, as the apiserver's does.
pub fn negotiate(headers: &HeaderMap) -> Result<Protocol, String> {
    let offered = offered(headers);
    offered
        .iter()
        .find_map(|o| Protocol::SERVED.into_iter().find(|p| p.name() == o))
        .ok_or_else(|| {
            let served: Vec<&str> = Protocol::SERVED.iter().map(|p| p.name()).collect();
            unsupported(&offered, &served)
        })
}

/// Checks that the client offers `protocol`, the one served.
pub fn require(headers: &HeaderMap, protocol: &str) -> Result<(), String> {
    let offered = offered(headers);
    if offered.iter().any(|o| o == protocol) {
        Ok(())
    } else {
        Err(unsupported(&offered, &[protocol]))
    }
}

fn unsupported(offered: &[String], served: &[&str]) -> String {
    format!(
        "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server supports {served:?}"
    )
}

/// The stream protocols the client offers, in its order.
fn offered(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(PROTOCOL_HEADER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn the_clients_first_served_offer_wins() {
        let h = headers(&[
            ("Upgrade", "SPDY/3.1"),
            (PROTOCOL_HEADER, "v5.channel.k8s.io"),
            (PROTOCOL_HEADER, "v4.channel.k8s.io"),
            (PROTOCOL_HEADER, "v3.channel.k8s.io"),
            (PROTOCOL_HEADER, "channel.k8s.io"),
        ]);
        assert!(wants_spdy(&h));
        assert_eq!(negotiate(&h), Ok(Protocol::V4));
        let h = headers(&[(PROTOCOL_HEADER, "v2.channel.k8s.io, v3.channel.k8s.io")]);
        assert_eq!(negotiate(&h), Ok(Protocol::V2));
    }

    #[test]
    fn no_common_protocol_is_an_error_naming_both_sides() {
        let e = negotiate(&headers(&[(PROTOCOL_HEADER, "channel.k8s.io")])).unwrap_err();
        assert!(e.contains("client supports [\"channel.k8s.io\"]"), "{e}");
        assert!(e.contains("v4.channel.k8s.io"), "{e}");
        assert!(negotiate(&HeaderMap::new()).is_err());
        assert!(!wants_spdy(&headers(&[("Upgrade", "websocket")])));
    }

    #[test]
    fn port_forward_needs_its_one_protocol() {
        let h = headers(&[(PROTOCOL_HEADER, "portforward.k8s.io")]);
        assert_eq!(require(&h, "portforward.k8s.io"), Ok(()));
        let e = require(
            &headers(&[(PROTOCOL_HEADER, "v4.channel.k8s.io")]),
            "portforward.k8s.io",
        )
        .unwrap_err();
        assert!(
            e.contains("server supports [\"portforward.k8s.io\"]"),
            "{e}"
        );
    }
}
