//! Finding data among zeros, and where two runs of bytes differ. A follower of a
//! preallocated log reads past the writer's last record into zeros on every poll,
//! and its guard compares a block it already read with the file each time: a byte
//! at a time, those scans were most of the CPU such a follower used. These look
//! at a word of [`STEP`] bytes at a time, which the compiler turns into vector
//! instructions, and only scan bytes one by one inside the word that holds the
//! answer.

/// Bytes looked at per step.
const STEP: usize = 32;

/// Whether a whole step holds only zeros.
#[inline]
fn step_is_zero(step: &[u8]) -> bool {
    let step: &[u8; STEP] = step.try_into().expect("a whole step");
    step.iter().fold(0u8, |any, &b| any | b) == 0
}

/// The index of the first byte of `bytes` that is not zero.
pub(crate) fn first_nonzero(bytes: &[u8]) -> Option<usize> {
    let mut from = 0;
    for step in bytes.chunks_exact(STEP) {
        if !step_is_zero(step) {
            break;
        }
        from += STEP;
    }
    bytes[from..]
        .iter()
        .position(|&b| b != 0)
        .map(|at| from + at)
}

/// The index of the last byte of `bytes` that is not zero.
pub(crate) fn last_nonzero(bytes: &[u8]) -> Option<usize> {
    let mut to = bytes.len();
    for step in bytes.rchunks_exact(STEP) {
        if !step_is_zero(step) {
            break;
        }
        to -= STEP;
    }
    bytes[..to].iter().rposition(|&b| b != 0)
}

/// Whether `bytes` holds only zeros (true when empty).
pub(crate) fn all_zero(bytes: &[u8]) -> bool {
    first_nonzero(bytes).is_none()
}

/// The index of the first byte where `a` and `b` differ, over their common length.
pub(crate) fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    let len = a.len().min(b.len());
    let (a, b) = (&a[..len], &b[..len]);
    // Equal is what a guard expects: one comparison of the whole (a `memcmp`).
    if a == b {
        return None;
    }
    let mut from = 0;
    for (x, y) in a.chunks(STEP).zip(b.chunks(STEP)) {
        if x != y {
            break;
        }
        from += x.len();
    }
    a[from..]
        .iter()
        .zip(&b[from..])
        .position(|(x, y)| x != y)
        .map(|at| from + at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain byte-at-a-time answers, to hold the word-at-a-time ones against.
    fn reference_first(bytes: &[u8]) -> Option<usize> {
        bytes.iter().position(|&b| b != 0)
    }

    fn reference_last(bytes: &[u8]) -> Option<usize> {
        bytes.iter().rposition(|&b| b != 0)
    }

    #[test]
    fn finds_the_first_and_last_data_byte_at_every_place_and_length() {
        // Every length around a few steps, with data at every index (and none):
        // the answer may sit in a whole step, in the remainder before or after the
        // steps, or nowhere.
        for len in 0..(4 * STEP + 3) {
            let zeros = vec![0u8; len];
            assert_eq!(first_nonzero(&zeros), None, "len {len}");
            assert_eq!(last_nonzero(&zeros), None, "len {len}");
            assert!(all_zero(&zeros));
            for at in 0..len {
                let mut one = zeros.clone();
                one[at] = 0x80;
                assert_eq!(first_nonzero(&one), Some(at), "len {len}, at {at}");
                assert_eq!(last_nonzero(&one), Some(at), "len {len}, at {at}");
                assert!(!all_zero(&one));
                // Two data bytes: the first and the last are told apart.
                let mut two = one.clone();
                two[len - 1 - at] = 1;
                assert_eq!(first_nonzero(&two), reference_first(&two));
                assert_eq!(last_nonzero(&two), reference_last(&two));
            }
        }
    }

    #[test]
    fn finds_the_first_difference_at_every_place_and_length() {
        for len in 0..(4 * STEP + 3) {
            let a: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            assert_eq!(first_difference(&a, &a.clone()), None, "len {len}");
            for at in 0..len {
                let mut b = a.clone();
                b[at] ^= 0x10;
                assert_eq!(first_difference(&a, &b), Some(at), "len {len}, at {at}");
                // A later difference too: the first one is the answer.
                b[len - 1] ^= 0x01;
                let expected = a.iter().zip(&b).position(|(x, y)| x != y);
                assert_eq!(first_difference(&a, &b), expected, "len {len}, at {at}");
            }
        }
    }

    #[test]
    fn compares_only_the_common_length() {
        assert_eq!(first_difference(b"abc", b"abcdef"), None);
        assert_eq!(first_difference(b"abX", b"abcdef"), Some(2));
        assert_eq!(first_difference(b"", b"x"), None);
    }
}
