//! A shared secret, proven in both directions before the hello (feature
//! `replica-auth`): a challenge answered with an HMAC, never the secret on the
//! wire.
//!
//! ```text
//! challenge  "WALCAUTH" | nonce [u8; 32]                 each end, first (40 bytes)
//! proof      HMAC-SHA256(secret, role | replica's nonce | primary's nonce)
//!            role: "walcodec replica" from the replica, "walcodec primary" from
//!            the primary (a proof is never valid in the other direction)       (32 bytes)
//! ```
//!
//! Each end sends its challenge, reads the other's, sends its proof, reads the
//! other's and checks it in constant time; only then does the hello go out. A peer
//! without the secret learns nothing of the log (the primary's hello carries its
//! end), pins nothing and sends nothing a replica writes. It keeps out strays and
//! impostors, not a man in the middle of a live connection: the messages after
//! the handshake carry no MAC (use TLS with client certificates for that).

use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::Error;

/// The first bytes of each end's challenge.
pub(crate) const AUTH_MAGIC: [u8; 8] = *b"WALCAUTH";

const NONCE_LEN: usize = 32;
const PROOF_LEN: usize = 32;

// The directory keeps the secret among its settings, so the type lives below.
pub(crate) use crate::logdir::ship::Secret;

/// Which end this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Primary,
    Replica,
}

impl Role {
    fn label(self) -> &'static [u8] {
        match self {
            Role::Primary => b"walcodec primary",
            Role::Replica => b"walcodec replica",
        }
    }

    fn other(self) -> Role {
        match self {
            Role::Primary => Role::Replica,
            Role::Replica => Role::Primary,
        }
    }
}

fn proof(secret: &Secret, role: Role, replica_nonce: &[u8], primary_nonce: &[u8]) -> Hmac<Sha256> {
    // An HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.bytes()).expect("any key length");
    mac.update(role.label());
    mac.update(replica_nonce);
    mac.update(primary_nonce);
    mac
}

fn refused(reason: &'static str) -> Error {
    Error::ReplicaAuthentication {
        reason: reason.into(),
    }
}

/// Proves the secret to the peer and checks the peer's proof, each step within
/// `timeout`.
pub(crate) async fn handshake<R, W>(
    rd: &mut R,
    wr: &mut W,
    secret: &Secret,
    role: Role,
    timeout: Duration,
) -> Result<(), Error>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut ours = [0u8; NONCE_LEN];
    getrandom::fill(&mut ours).map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut challenge = AUTH_MAGIC.to_vec();
    challenge.extend_from_slice(&ours);
    timed(timeout, async {
        wr.write_all(&challenge).await?;
        wr.flush().await
    })
    .await?;

    let mut magic = [0u8; 8];
    timed(timeout, rd.read_exact(&mut magic)).await?;
    if magic != AUTH_MAGIC {
        return Err(refused(
            "the peer sent no shared-secret challenge (set the same secret on both ends)",
        ));
    }
    let mut theirs = [0u8; NONCE_LEN];
    timed(timeout, rd.read_exact(&mut theirs)).await?;
    if theirs == ours {
        // Our own challenge reflected back.
        return Err(refused("the peer echoed the challenge"));
    }
    let (replica_nonce, primary_nonce) = match role {
        Role::Replica => (&ours, &theirs),
        Role::Primary => (&theirs, &ours),
    };
    let mine = proof(secret, role, replica_nonce, primary_nonce)
        .finalize()
        .into_bytes();
    timed(timeout, async {
        wr.write_all(&mine).await?;
        wr.flush().await
    })
    .await?;
    let mut answer = [0u8; PROOF_LEN];
    timed(timeout, rd.read_exact(&mut answer)).await?;
    // Constant time: `verify_slice` compares without an early exit.
    proof(secret, role.other(), replica_nonce, primary_nonce)
        .verify_slice(&answer)
        .map_err(|_| refused("the peer does not know the shared secret"))
}

/// One step of the handshake within `timeout`; a connection that ends in it is a
/// refusal too (the peer refused us).
async fn timed<T>(
    timeout: Duration,
    step: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, Error> {
    match tokio::time::timeout(timeout, step).await {
        Err(_) => Err(refused("no answer to the shared-secret challenge in time")),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(refused(
            "the connection ended in the shared-secret handshake (the peer refused it)",
        )),
        Ok(Err(e)) => Err(e.into()),
        Ok(Ok(value)) => Ok(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn pair(
        primary: &'static [u8],
        replica: &'static [u8],
    ) -> (Result<(), Error>, Result<(), Error>) {
        let (a, b) = tokio::io::duplex(1024);
        let t = Duration::from_secs(5);
        let p = tokio::spawn(async move {
            let (mut rd, mut wr) = tokio::io::split(a);
            handshake(&mut rd, &mut wr, &Secret::new(primary), Role::Primary, t).await
        });
        let (mut rd, mut wr) = tokio::io::split(b);
        let r = handshake(&mut rd, &mut wr, &Secret::new(replica), Role::Replica, t).await;
        (p.await.unwrap(), r)
    }

    #[tokio::test]
    async fn the_same_secret_passes_both_ways_and_another_fails_both_ways() {
        let (p, r) = pair(b"s3cret", b"s3cret").await;
        assert!(p.is_ok() && r.is_ok(), "{p:?} {r:?}");
        let (p, r) = pair(b"s3cret", b"guess").await;
        assert!(
            matches!(p, Err(Error::ReplicaAuthentication { .. })),
            "{p:?}"
        );
        assert!(
            matches!(r, Err(Error::ReplicaAuthentication { .. })),
            "{r:?}"
        );
    }

    #[tokio::test]
    async fn a_proof_for_one_role_is_refused_for_the_other() {
        // Two "primaries" with the right secret: each one's proof is a primary's,
        // never what it expects from a replica.
        let (a, b) = tokio::io::duplex(1024);
        let t = Duration::from_secs(5);
        let other = tokio::spawn(async move {
            let (mut rd, mut wr) = tokio::io::split(a);
            handshake(&mut rd, &mut wr, &Secret::new(b"k"), Role::Primary, t).await
        });
        let (mut rd, mut wr) = tokio::io::split(b);
        let ours = handshake(&mut rd, &mut wr, &Secret::new(b"k"), Role::Primary, t).await;
        assert!(matches!(ours, Err(Error::ReplicaAuthentication { .. })));
        assert!(matches!(
            other.await.unwrap(),
            Err(Error::ReplicaAuthentication { .. })
        ));
    }

    #[tokio::test]
    async fn the_secret_never_crosses_the_wire() {
        let secret: &[u8] = b"a rather long secret";
        let (a, mut b) = tokio::io::duplex(1024);
        let p = tokio::spawn(async move {
            let (mut rd, mut wr) = tokio::io::split(a);
            handshake(
                &mut rd,
                &mut wr,
                &Secret::new(secret),
                Role::Primary,
                Duration::from_secs(5),
            )
            .await
        });
        // A stray peer that sends a challenge and garbage, recording all it gets.
        let mut challenge = AUTH_MAGIC.to_vec();
        challenge.extend_from_slice(&[7; NONCE_LEN]);
        b.write_all(&challenge).await.unwrap();
        b.write_all(&[0; PROOF_LEN]).await.unwrap();
        let mut got = Vec::new();
        let _ = b.read_to_end(&mut got).await;
        assert!(matches!(
            p.await.unwrap(),
            Err(Error::ReplicaAuthentication { .. })
        ));
        assert_eq!(got.len(), 8 + NONCE_LEN + PROOF_LEN);
        assert!(!got.windows(secret.len()).any(|w| w == secret));
    }
}
