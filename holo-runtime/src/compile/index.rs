//! The compiler's indexes of a graph: every flow of each port and the producers and
//! successors of each operator, each in one allocation and read by position (what passes
//! read of each port and the operators' names are the graph's own tables,
//! [`PortFacts`](crate::graph::PortFacts) and [`Names`](crate::graph::Names)).
//!
//! Passes look these up once per port or operator, so a lookup must not grow with the
//! graph: a map of vectors cost a tree search (a cache miss per level at 10,000
//! operators) and an allocation per key, which made compile superlinear (issue 12).

/// Lists of `u32` for the keys `0..len` (compressed sparse rows): row `k` is
/// `items[offsets[k]..offsets[k + 1]]`.
#[derive(Debug, Default)]
pub(crate) struct Adjacency {
    /// 32 bits, as the items: a graph's flows and ports are counted in `u32` (the
    /// offsets of the ports' two tables were 320 kB at 10,000 operators in `usize`).
    offsets: Vec<u32>,
    items: Vec<u32>,
}

impl Adjacency {
    /// Rows for the keys `0..keys` from `(key, item)` pairs; each row keeps its items in
    /// the order of `pairs` (a counting sort). Every key is below `keys`.
    pub(crate) fn from_pairs(keys: usize, pairs: &[(u32, u32)]) -> Self {
        let mut offsets = vec![0u32; keys + 1];
        for &(k, _) in pairs {
            offsets[k as usize + 1] += 1;
        }
        for k in 0..keys {
            offsets[k + 1] += offsets[k];
        }
        let mut next = offsets[..keys].to_vec();
        let mut items = vec![0u32; pairs.len()];
        for &(k, item) in pairs {
            let at = &mut next[k as usize];
            items[*at as usize] = item;
            *at += 1;
        }
        Self { offsets, items }
    }

    /// The same rows, each sorted ascending and without repeats (a set per key).
    pub(crate) fn into_sets(mut self) -> Self {
        let mut kept = 0;
        for k in 0..self.len() {
            let (start, end) = (self.offsets[k] as usize, self.offsets[k + 1] as usize);
            self.items[start..end].sort_unstable();
            self.offsets[k] = u32::try_from(kept).unwrap_or(u32::MAX);
            for i in start..end {
                if i == start || self.items[i] != self.items[i - 1] {
                    self.items[kept] = self.items[i];
                    kept += 1;
                }
            }
        }
        if let Some(last) = self.offsets.last_mut() {
            *last = u32::try_from(kept).unwrap_or(u32::MAX);
        }
        self.items.truncate(kept);
        self
    }

    /// The number of keys.
    pub(crate) fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Row `key` (empty past the last key).
    pub(crate) fn row(&self, key: usize) -> &[u32] {
        match (self.offsets.get(key), self.offsets.get(key + 1)) {
            (Some(&start), Some(&end)) => &self.items[start as usize..end as usize],
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Adjacency;

    #[test]
    fn rows_keep_the_order_of_the_pairs() {
        let a = Adjacency::from_pairs(4, &[(2, 7), (0, 5), (2, 1), (2, 7)]);
        assert_eq!(a.len(), 4);
        assert_eq!(
            (a.row(0), a.row(1), a.row(2), a.row(3), a.row(4)),
            (&[5][..], &[][..], &[7, 1, 7][..], &[][..], &[][..])
        );
    }

    #[test]
    fn sets_are_sorted_and_deduplicated() {
        let a =
            Adjacency::from_pairs(4, &[(2, 7), (0, 5), (2, 1), (2, 7), (3, 2), (0, 5)]).into_sets();
        assert_eq!(
            (a.row(0), a.row(1), a.row(2), a.row(3)),
            (&[5][..], &[][..], &[1, 7][..], &[2][..])
        );
        assert_eq!(Adjacency::default().into_sets().row(0), &[] as &[u32]);
    }
}
