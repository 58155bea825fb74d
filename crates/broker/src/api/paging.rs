//! Optional paging of the long lists (session hosts, user sessions), named
//! like Azure Virtual Desktop's list calls: `?pageSize=N&initialSkip=K`.
//! Without `pageSize` a list answers everything, as it always did, so
//! existing clients see no change; with it, the answer holds at most
//! `pageSize` items and a `nextLink` (a path with the same query) while
//! more remain. The web console pages a 10,000-host pool this way.

use std::cmp::Ordering;
use std::fmt::Write;

use axum::http::Uri;
use serde::Deserialize;

pub use api::types::Page;

use super::error::ApiError;

/// Largest `pageSize` accepted: a page is built under the pool's lock, so
/// its size is bounded.
pub const MAX_PAGE_SIZE: u32 = 1000;

/// `?pageSize=&initialSkip=` of a list; any other parameter (a misspelt
/// `pagesize`, say) is refused, as on every other query of the API.
#[derive(Deserialize, Default, Debug, Clone, Copy)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PageQuery {
    pub page_size: Option<u32>,
    pub initial_skip: Option<usize>,
}

impl PageQuery {
    /// Refuses a page size outside 1..=MAX_PAGE_SIZE with the API's usual
    /// error shape.
    pub fn validate(&self) -> Result<(), ApiError> {
        match self.page_size {
            Some(n) if n == 0 || n > MAX_PAGE_SIZE => Err(ApiError::invalid(format!(
                "pageSize: {n} is out of range 1..={MAX_PAGE_SIZE}"
            ))),
            _ => Ok(()),
        }
    }
}

/// Takes one page of `items` (mapping only the items on it), and the
/// `nextLink` to the rest of the list when more remain (see [`next_link`];
/// `uri` is the request's, as the client sent it).
pub fn page<I, T, U>(items: I, q: PageQuery, map: impl Fn(T) -> U, uri: &Uri) -> Page<U>
where
    I: Iterator<Item = T>,
{
    let skip = q.initial_skip.unwrap_or(0);
    let mut items = items.skip(skip);
    let Some(size) = q.page_size else {
        return Page {
            value: items.map(map).collect(),
            next_link: None,
        };
    };
    let size = size as usize;
    let value: Vec<U> = items.by_ref().take(size).map(&map).collect();
    let next_link = items.next().map(|_| next_link(uri, skip + size));
    Page { value, next_link }
}

/// Sorts `v` by `cmp` as far as the page `q` needs: all of it when the
/// list is not paged, else only the `initialSkip + pageSize + 1` first
/// items (those skipped, the page, and one more that tells whether a next
/// page exists), dropping the rest. That is O(n + k log k) rather than
/// O(n log n) under the pool's lock. `cmp` must not tie two items (the
/// page is then the one a full sort would give).
pub fn sort_for_page<T>(v: &mut Vec<T>, q: PageQuery, mut cmp: impl FnMut(&T, &T) -> Ordering) {
    if let Some(size) = q.page_size {
        let k = q
            .initial_skip
            .unwrap_or(0)
            .saturating_add(size as usize)
            .saturating_add(1);
        if k < v.len() {
            v.select_nth_unstable_by(k, &mut cmp);
            v.truncate(k);
        }
    }
    v.sort_by(cmp);
}

/// The request's own path and query with `initialSkip=next_skip`: every
/// other query pair is kept raw, in its order, so a filter comes back
/// exactly as the client encoded it (nothing is decoded and re-encoded).
/// A pair is recognised as `initialSkip` by its raw name.
pub fn next_link(uri: &Uri, next_skip: usize) -> String {
    next_link_with(uri, "initialSkip", next_skip)
}

/// Like [`next_link`], with `param=value` in place of `initialSkip` (the
/// audit log continues below an entry's id, `beforeId`).
pub fn next_link_with(uri: &Uri, param: &str, value: impl std::fmt::Display) -> String {
    let mut link = uri.path().to_string();
    let mut sep = '?';
    for pair in uri.query().unwrap_or_default().split('&') {
        let name = pair.split_once('=').map_or(pair, |(name, _)| name);
        if pair.is_empty() || name == param {
            continue;
        }
        link.push(sep);
        link.push_str(pair);
        sep = '&';
    }
    let _ = write!(link, "{sep}{param}={value}");
    link
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(size: Option<u32>, skip: Option<usize>) -> PageQuery {
        PageQuery {
            page_size: size,
            initial_skip: skip,
        }
    }

    #[test]
    fn pages_and_links() {
        let uri = Uri::from_static("/l?pageSize=2");
        let page = |items: std::ops::Range<i32>, q| page(items, q, |x| x, &uri);
        let link = |n: usize| Some(format!("/l?pageSize=2&initialSkip={n}"));
        // No pageSize: everything, no link (the list as it always was).
        let p = page(0..5, q(None, None));
        assert_eq!((p.value, p.next_link), (vec![0, 1, 2, 3, 4], None));
        // 5 items, pages of 2: [0,1] → skip 2, [2,3] → skip 4, [4] → end.
        let p = page(0..5, q(Some(2), None));
        assert_eq!((p.value, p.next_link), (vec![0, 1], link(2)));
        let p = page(0..5, q(Some(2), Some(2)));
        assert_eq!((p.value, p.next_link), (vec![2, 3], link(4)));
        let p = page(0..5, q(Some(2), Some(4)));
        assert_eq!((p.value, p.next_link), (vec![4], None));
        // Exactly one full last page: no link to an empty page.
        let p = page(0..4, q(Some(2), Some(2)));
        assert_eq!((p.value, p.next_link), (vec![2, 3], None));
        // Past the end: empty.
        let p = page(0..4, q(Some(2), Some(10)));
        assert_eq!((p.value, p.next_link), (Vec::<i32>::new(), None));
        // initialSkip alone skips, and answers the rest.
        let p = page(0..4, q(None, Some(1)));
        assert_eq!((p.value, p.next_link), (vec![1, 2, 3], None));
    }

    #[test]
    fn next_link_keeps_the_raw_query_but_initial_skip() {
        let link = |uri: &'static str, n| next_link(&Uri::from_static(uri), n);
        // Filters come back byte for byte, in their order; initialSkip
        // (wherever it was) is replaced at the end.
        assert_eq!(
            link(
                "/api/v1/hostPools/p/userSessions?user=A%40b%2Bc&initialSkip=2&pageSize=2&sessionHost=h1",
                4
            ),
            "/api/v1/hostPools/p/userSessions?user=A%40b%2Bc&pageSize=2&sessionHost=h1&initialSkip=4"
        );
        assert_eq!(link("/l?pageSize=1", 1), "/l?pageSize=1&initialSkip=1");
        // Empty pairs are dropped; a name without a value is kept.
        assert_eq!(
            link("/l?&pageSize=1&&x&", 3),
            "/l?pageSize=1&x&initialSkip=3"
        );
        assert_eq!(link("/l?initialSkip=9", 3), "/l?initialSkip=3");
        assert_eq!(link("/l", 3), "/l?initialSkip=3");
        // Only the exact name is replaced.
        assert_eq!(
            link("/l?initialSkipX=1&pageSize=1", 2),
            "/l?initialSkipX=1&pageSize=1&initialSkip=2"
        );
    }

    #[test]
    fn a_partial_sort_gives_the_pages_of_a_full_sort() {
        // 200 distinct values in a scrambled order.
        let items: Vec<u32> = (0..200).map(|i| (i * 37 + 11) % 200).collect();
        let uri = Uri::from_static("/l");
        let mut sorted = items.clone();
        sorted.sort();
        for size in [
            None,
            Some(1),
            Some(7),
            Some(100),
            Some(199),
            Some(200),
            Some(1000),
        ] {
            for skip in [
                None,
                Some(0),
                Some(1),
                Some(98),
                Some(192),
                Some(199),
                Some(200),
            ] {
                let q = q(size, skip);
                let mut v = items.clone();
                sort_for_page(&mut v, q, u32::cmp);
                let (got, want) = (
                    page(v.into_iter(), q, |x| x, &uri),
                    page(sorted.iter().copied(), q, |x| x, &uri),
                );
                assert_eq!(
                    (got.value, got.next_link),
                    (want.value, want.next_link),
                    "{q:?}"
                );
            }
        }
        // A huge initialSkip does not overflow.
        let mut v = items.clone();
        sort_for_page(&mut v, q(Some(MAX_PAGE_SIZE), Some(usize::MAX)), u32::cmp);
        assert_eq!(v, sorted);
    }

    #[test]
    fn page_size_bounds() {
        assert!(q(Some(0), None).validate().is_err());
        assert!(q(Some(MAX_PAGE_SIZE + 1), None).validate().is_err());
        assert!(q(Some(1), None).validate().is_ok());
        assert!(q(Some(MAX_PAGE_SIZE), None).validate().is_ok());
        assert!(q(None, Some(7)).validate().is_ok());
    }
}
