//! The table of live sessions at the RD Gateway, as at the front door
//! (`front_door.rs`: `a_user_is_placed_and_relayed_and_reconnects_to_the_same_host`,
//! `a_reconnect_to_a_session_live_elsewhere_never_changes_its_state`): a
//! second tunnel of a session this gateway owns joins it, so the session
//! stays Active until the last one closes, and a tunnel to a session live
//! through someone else's connection never changes its state.

use broker::front_door::InProcess;
use gateway::Placer;
use gateway::tsgu::Packet;
use gateway::tsgu::hresult::S_OK;
use gateway::tsgu::packet::PKT_TYPE_CHANNEL_RESPONSE;
use placement::SessionState;

use crate::rd_gateway::{Client, farm, host, s};

/// Opens a tunnel for `user` of pool `p` and sees its first bytes
/// relayed (the host's greeting names it).
async fn tunnel(farm: &crate::rd_gateway::Farm, user: &str) -> Client {
    let mut client = Client::open(&farm.gateway).await;
    assert_eq!(
        client.setup(&farm.ticket("p", user, 60), "p").await,
        (PKT_TYPE_CHANNEL_RESPONSE, S_OK)
    );
    assert_eq!(client.exchange(b"x", 4).await, b"h1:x");
    client
}

/// Closes the tunnel's channel, as a client does when it is done.
async fn close(mut client: Client) {
    client
        .send(Packet::CloseChannel { status_code: S_OK })
        .await;
    assert_eq!(
        client.recv().await,
        Some(Packet::CloseChannelResponse { status_code: S_OK })
    );
}

#[tokio::test]
async fn a_second_tunnel_of_a_session_joins_it_and_only_the_last_close_disconnects_it() {
    let farm = farm(vec![Some(host("h1").await)]).await;
    let mut first = tunnel(&farm, "alice").await;
    // Enough both ways for a logon (S9).
    assert_eq!(first.exchange(b"big", 2000).await.len(), 2000);
    first.exchange(&[1; 600], 600).await;
    farm.wait_sessions("p", vec![s("alice", "h1", SessionState::Active)])
        .await;
    // Her second tunnel (a ticket proves it is hers) reconnects (S1) to
    // the session this gateway's first tunnel owns: it joins it.
    let second = tunnel(&farm, "alice").await;
    close(first).await;
    // A tunnel of bob's, to know the first one's close was handled.
    let bob = tunnel(&farm, "bob").await;
    let sessions = farm.sessions("p").await;
    assert!(
        sessions.contains(&s("alice", "h1", SessionState::Active)),
        "alice's second tunnel is still open: her session stays Active: {sessions:?}"
    );
    close(second).await;
    drop(bob);
    farm.wait_sessions("p", vec![s("alice", "h1", SessionState::Disconnected)])
        .await;
}

#[tokio::test]
async fn a_tunnel_to_a_session_live_elsewhere_never_changes_its_state() {
    let farm = farm(vec![Some(host("h1").await)]).await;
    // alice is Active on h1 through a connection that is not this
    // gateway's (her own client, another door).
    let placer = InProcess::new(farm.broker.clone());
    let request = gateway::ConnectInput {
        user: "alice".into(),
        ..gateway::ConnectInput::default()
    };
    let placed = placer.connect("p", &request).await.expect("placed");
    placer
        .set_session_state("p", &placed.session_id, SessionState::Active)
        .await
        .expect("marked");
    farm.wait_sessions("p", vec![s("alice", "h1", SessionState::Active)])
        .await;
    // A tunnel with her ticket is relayed to her host, even through a
    // "logon" worth of bytes, and closed …
    let mut other = tunnel(&farm, "alice").await;
    assert_eq!(other.exchange(b"big", 2000).await.len(), 2000);
    other.exchange(&[1; 600], 600).await;
    close(other).await;
    // … (a tunnel of bob's, to know its close was handled) …
    let bob = tunnel(&farm, "bob").await;
    drop(bob);
    // … and her session is as the connection that owns it left it.
    let sessions = farm.sessions("p").await;
    assert!(
        sessions.contains(&s("alice", "h1", SessionState::Active)),
        "{sessions:?}"
    );
}
