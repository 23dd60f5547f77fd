//! A bus subscription survives Redis dropping it. (Its own test binary: it kills every pub/sub
//! client of the Redis server, which must not disturb other tests' subscriptions.)

use std::time::Duration;

use repowire_relay::cluster::bus::redis::RedisBus;
use repowire_relay::cluster::bus::{Bus, BusEvent};

#[tokio::test]
async fn a_dropped_subscription_comes_back_by_itself() {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("repowire-test-{}", uuid::Uuid::new_v4().simple());
    let bus = RedisBus::connect(&url, &prefix, "pod-a")
        .await
        .expect("redis");
    let mut events = bus.subscribe().await.expect("sub");

    let mut admin = redis::Client::open(url.as_str())
        .expect("client")
        .get_multiplexed_async_connection()
        .await
        .expect("admin connection");
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut admin)
        .await
        .expect("client kill");
    assert!(killed >= 1, "the subscription was not killed");

    // Publish until one arrives: events sent while the subscription is down are lost by
    // design (pub/sub); the point is that the pod hears events again, without a restart.
    let event = BusEvent::KeyRevoked {
        key_id: "key-after-kill".into(),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (mut lost, mut told) = (false, false);
    loop {
        bus.to_all(&event).await.expect("publish");
        match tokio::time::timeout(Duration::from_millis(100), events.recv()).await {
            // The pod is told the subscription broke (it stops trusting what it kept) and came
            // back (it then recovers), in that order.
            Ok(Some(BusEvent::SubscriptionLost)) => {
                assert!(!told, "loss reported after the re-subscription");
                lost = true;
            }
            Ok(Some(BusEvent::Resubscribed)) => told = true,
            Ok(Some(got)) => {
                assert_eq!(got, event);
                break;
            }
            Ok(None) => panic!("the subscription channel closed"),
            Err(_) => {}
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the subscription never came back"
        );
    }
    assert!(lost, "the broken subscription was not reported");
    assert!(told, "the re-subscription was not reported");
}
