//! A vector that grows by chunks of [`CHUNK`] elements and never moves
//! what it holds, for the session and user slabs.
//!
//! Why not a `Vec`: a `Vec` doubles, and the push that doubles it copies
//! every element. For the session slab of a large pool that was one
//! placement in a hundred thousand costing 54 ms at 131,072 sessions and
//! 125 ms at 262,144 (tens of MB copied and faulted in under the pool's
//! lock, while every other request of the pool waited). Here a push that
//! fills a chunk only allocates the next one; the list of chunks is a
//! `Vec` too, but of one pointer per 4,096 elements.

/// Elements per chunk (a power of two, so that an index splits by shifts).
const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;

#[derive(Debug)]
pub(super) struct Chunked<T> {
    /// Every chunk but the last holds exactly [`CHUNK`] elements; each was
    /// made with that capacity (a clone too), so none ever reallocates.
    chunks: Vec<Vec<T>>,
}

impl<T: Clone> Clone for Chunked<T> {
    fn clone(&self) -> Self {
        let chunks = self
            .chunks
            .iter()
            .map(|c| {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.extend_from_slice(c);
                chunk
            })
            .collect();
        Chunked { chunks }
    }
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked { chunks: Vec::new() }
    }
}

impl<T> Chunked<T> {
    pub(super) fn len(&self) -> usize {
        self.chunks
            .last()
            .map_or(0, |last| (self.chunks.len() - 1) * CHUNK + last.len())
    }

    pub(super) fn push(&mut self, value: T) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => last.push(value),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(value);
                self.chunks.push(chunk);
            }
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

impl<T> std::ops::Index<usize> for Chunked<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        &self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }
}

impl<T> std::ops::IndexMut<usize> for Chunked<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Across chunk boundaries, every element stays where it was put, and
    /// an index past the end is refused as a `Vec` refuses it.
    #[test]
    fn holds_what_a_vec_holds() {
        let mut c = Chunked::default();
        let mut v = Vec::new();
        for i in 0..(3 * CHUNK + 5) {
            c.push(i);
            v.push(i);
            assert_eq!(c.len(), v.len());
        }
        c[CHUNK] = 7;
        v[CHUNK] = 7;
        assert_eq!(c.len(), v.len());
        assert!(c.iter().eq(v.iter()));
        assert!((0..v.len()).all(|i| c[i] == v[i]));
        assert!(std::panic::catch_unwind(|| c[v.len()]).is_err());
        let mut copy = c.clone();
        assert!(copy.chunks.iter().all(|c| c.capacity() == CHUNK));
        copy.push(1);
        assert!(copy.iter().eq(v.iter().chain([&1])));
    }
}
