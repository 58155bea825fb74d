//! The forwarders that reach a test DC in its own network namespace: TCP
//! listeners on the main namespace's 127.0.0.1 whose connections are
//! opened, to the DC's 127.0.0.1, by a thread that entered the DC's
//! namespace (`setns`), so no packet is ever addressed to the namespace
//! from outside.

use std::fs::File;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use crate::{PATIENCE, eventually_blocking, free_port};

/// Live connections a forwarder relays at once; more are refused.
const MAX_CONNECTIONS: usize = 64;

/// A thread that entered the DC's network namespace and opens TCP
/// connections there, to the namespace's 127.0.0.1, for the forwarders
/// (a socket stays in the namespace it was made in, whichever thread then
/// uses it). It ends when the last forwarder is dropped.
#[derive(Clone)]
pub(crate) struct Connector {
    requests: mpsc::Sender<(u16, mpsc::Sender<std::io::Result<TcpStream>>)>,
}

impl Connector {
    pub(crate) fn enter(netns: &str) -> Connector {
        let ns = File::open(format!("/run/netns/{netns}")).expect("open the DC's namespace");
        let (requests, incoming) =
            mpsc::channel::<(u16, mpsc::Sender<std::io::Result<TcpStream>>)>();
        let (entered, entered_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let joined = nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET);
            let _ = entered.send(joined.map_err(|e| e.to_string()));
            if joined.is_err() {
                return;
            }
            for (port, reply) in incoming {
                let stream =
                    TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], port)), PATIENCE);
                let _ = reply.send(stream);
            }
        });
        entered_rx
            .recv_timeout(PATIENCE)
            .expect("the connector thread answers")
            .expect("enter the DC's network namespace (as root)");
        Connector { requests }
    }

    fn connect(&self, port: u16) -> std::io::Result<TcpStream> {
        let (reply, answer) = mpsc::channel();
        self.requests
            .send((port, reply))
            .map_err(|_| std::io::Error::other("the connector thread is gone"))?;
        answer
            .recv_timeout(PATIENCE + PATIENCE)
            .map_err(|_| std::io::Error::other("the connector thread did not answer"))?
    }
}

/// A forwarder from 127.0.0.1:`port` in the main namespace to the DC's
/// `target` port, which can be stopped and started again on the same port.
pub(crate) struct Forward {
    pub(crate) port: u16,
    target: u16,
    connector: Connector,
    live: Option<Listening>,
}

struct Listening {
    stop: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<(u64, TcpStream)>>>,
    accept: std::thread::JoinHandle<()>,
}

impl Forward {
    pub(crate) fn start(connector: Connector, target: u16) -> Forward {
        let mut forward = Forward {
            port: free_port(),
            target,
            connector,
            live: None,
        };
        forward.listen();
        forward
    }

    /// Listens on the forwarder's port (again).
    pub(crate) fn listen(&mut self) {
        if self.live.is_some() {
            return;
        }
        let port = self.port;
        let listener = eventually_blocking(PATIENCE, || TcpListener::bind(("127.0.0.1", port)))
            .unwrap_or_else(|e| panic!("listen on 127.0.0.1:{port} for the DC: {e}"));
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let (stop2, connections2, connector, target) = (
            stop.clone(),
            connections.clone(),
            self.connector.clone(),
            self.target,
        );
        let accept = std::thread::spawn(move || {
            let next = AtomicU64::new(0);
            for inbound in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(inbound) = inbound else { continue };
                // Both ends of each relayed connection are listed.
                if connections2.lock().unwrap().len() >= 2 * MAX_CONNECTIONS {
                    continue; // dropped: refused
                }
                let Ok(outbound) = connector.connect(target) else {
                    continue;
                };
                let id = next.fetch_add(1, Ordering::SeqCst);
                relay(id, inbound, outbound, &connections2);
            }
        });
        self.live = Some(Listening {
            stop,
            connections,
            accept,
        });
    }

    /// Stops listening and closes every relayed connection.
    pub(crate) fn stop(&mut self) {
        let Some(live) = self.live.take() else { return };
        live.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees `stop` and drops the
        // listener.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        let _ = live.accept.join();
        for (_, stream) in live.connections.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// Copies both ways between `inbound` and `outbound` on two threads,
/// listed in `connections` (both ends, to be shut down by a stop) until
/// either side closes.
fn relay(
    id: u64,
    inbound: TcpStream,
    outbound: TcpStream,
    connections: &Arc<Mutex<Vec<(u64, TcpStream)>>>,
) {
    let (Ok(in2), Ok(out2), Ok(in3), Ok(out3)) = (
        inbound.try_clone(),
        outbound.try_clone(),
        inbound.try_clone(),
        outbound.try_clone(),
    ) else {
        return;
    };
    connections.lock().unwrap().extend([(id, in3), (id, out3)]);
    let pump =
        |mut from: TcpStream, mut to: TcpStream, connections: Arc<Mutex<Vec<(u64, TcpStream)>>>| {
            move || {
                let _ = std::io::copy(&mut from, &mut to);
                let _ = to.shutdown(Shutdown::Both);
                let _ = from.shutdown(Shutdown::Both);
                connections.lock().unwrap().retain(|(i, _)| *i != id);
            }
        };
    std::thread::spawn(pump(inbound, out2, connections.clone()));
    std::thread::spawn(pump(outbound, in2, connections.clone()));
}
