//! Response bodies built from stored bytes without copying the objects in them.
//!
//! A list or watch response is the objects' stored JSON with a little framing between them.
//! [`Chunker`] turns that sequence into the chunks a body yields: framing and small objects
//! are copied together into one chunk of at most [`CHUNK_BYTES`]; an object of
//! [`SHARED_BYTES`] or more is yielded as its own chunk, a reference to the stored bytes
//! (`Bytes` is reference-counted), so a response never holds a copy of a large object.
//!
//! # Invariants
//! 1. A chunk the chunker copied holds at most [`CHUNK_BYTES`] plus one small piece (less
//!    than [`SHARED_BYTES`]); every other chunk is a stored object's own bytes.
//! 2. The concatenation of the chunks is exactly the pieces pushed, in order.

use bytes::{BufMut, Bytes, BytesMut};

/// The most bytes the chunker copies into one chunk before it hands the chunk on.
pub(crate) const CHUNK_BYTES: usize = 256 * 1024;

/// Objects this large or larger are passed on by reference instead of copied.
pub(crate) const SHARED_BYTES: usize = 16 * 1024;

/// Collects pieces of a response into chunks (keeps I1, I2).
#[derive(Debug, Default)]
pub(crate) struct Chunker {
    buf: BytesMut,
    ready: Vec<Bytes>,
}

impl Chunker {
    /// Copies `piece` (framing, or a small object) into the current chunk.
    pub fn copy(&mut self, piece: &[u8]) {
        self.buf.put_slice(piece);
        if self.buf.len() >= CHUNK_BYTES {
            self.flush();
        }
    }

    /// Adds a stored object's bytes: copied if small, else shared as a chunk of its own.
    pub fn share(&mut self, stored: &Bytes) {
        if stored.len() < SHARED_BYTES {
            self.copy(stored);
        } else {
            self.flush();
            self.ready.push(stored.clone());
        }
    }

    /// Ends the current chunk.
    pub fn flush(&mut self) {
        if !self.buf.is_empty() {
            self.ready.push(self.buf.split().freeze());
        }
    }

    /// The chunks completed so far, oldest first.
    pub fn take(&mut self) -> Vec<Bytes> {
        std::mem::take(&mut self.ready)
    }

    /// Ends the current chunk and returns every chunk as one `Bytes` (copying them together
    /// if there are several): for a response small enough to send whole.
    pub fn into_bytes(mut self) -> Bytes {
        self.flush();
        match self.ready.len() {
            0 => Bytes::new(),
            1 => self.ready.pop().expect("one chunk"),
            _ => {
                let mut all = BytesMut::with_capacity(self.ready.iter().map(Bytes::len).sum());
                self.ready.iter().for_each(|c| all.put_slice(c));
                all.freeze()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_pieces_are_copied_together_and_large_objects_shared() {
        let mut c = Chunker::default();
        let big = Bytes::from(vec![b'x'; SHARED_BYTES]);
        c.copy(b"[");
        c.share(&Bytes::from_static(b"{}"));
        c.copy(b",");
        c.share(&big);
        c.copy(b"]");
        c.flush();
        let chunks = c.take();
        assert_eq!(chunks.len(), 3);
        assert_eq!(&chunks[0][..], b"[{},");
        // The large object is the stored allocation itself, not a copy.
        assert_eq!(chunks[1].as_ptr(), big.as_ptr());
        assert_eq!(&chunks[2][..], b"]");
        let mut many = Chunker::default();
        for _ in 0..(3 * CHUNK_BYTES / 1000) {
            many.copy(&[b'y'; 1000]);
        }
        let chunks = many.take();
        assert!(chunks.len() >= 2 && chunks.iter().all(|c| c.len() < CHUNK_BYTES + 1000));
        let mut whole = Chunker::default();
        whole.copy(b"ab");
        whole.share(&big);
        assert_eq!(whole.into_bytes().len(), 2 + SHARED_BYTES);
    }
}
