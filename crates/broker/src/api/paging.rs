//! Optional paging of the long lists (session hosts, user sessions), named
//! like Azure Virtual Desktop's list calls: `?pageSize=N&initialSkip=K`.
//! Without `pageSize` a list answers everything, as it always did, so
//! existing clients see no change; with it, the answer holds at most
//! `pageSize` items and a `nextLink` (a path with the same query) while
//! more remain. The web console pages a 10,000-host pool this way.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ApiError;

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

/// `{"value": [...], "nextLink": "..."}`: a list, and where its next page
/// is while there is one (absent on the last page and on unpaged lists).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub value: Vec<T>,
    /// Path and query of the next page, e.g.
    /// `/api/v1/hostPools/p/sessionHosts?pageSize=100&initialSkip=200`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_link: Option<String>,
}

/// Takes one page of `items` (mapping only the items on it), and the
/// `nextLink` built by `link(next_skip)` when more remain.
pub fn page<I, T, U>(
    items: I,
    q: PageQuery,
    map: impl Fn(T) -> U,
    link: impl FnOnce(usize) -> String,
) -> Page<U>
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
    let next_link = items.next().map(|_| link(skip + size));
    Page { value, next_link }
}

/// Percent-encodes a query value (everything but RFC 3986 unreserved
/// characters), for the filters a `nextLink` carries on.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
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
        let link = |n: usize| format!("next={n}");
        // No pageSize: everything, no link (the list as it always was).
        let p = page(0..5, q(None, None), |x| x, link);
        assert_eq!((p.value, p.next_link), (vec![0, 1, 2, 3, 4], None));
        // 5 items, pages of 2: [0,1] → skip 2, [2,3] → skip 4, [4] → end.
        let p = page(0..5, q(Some(2), None), |x| x, link);
        assert_eq!((p.value, p.next_link), (vec![0, 1], Some("next=2".into())));
        let p = page(0..5, q(Some(2), Some(2)), |x| x, link);
        assert_eq!((p.value, p.next_link), (vec![2, 3], Some("next=4".into())));
        let p = page(0..5, q(Some(2), Some(4)), |x| x, link);
        assert_eq!((p.value, p.next_link), (vec![4], None));
        // Exactly one full last page: no link to an empty page.
        let p = page(0..4, q(Some(2), Some(2)), |x| x, link);
        assert_eq!((p.value, p.next_link), (vec![2, 3], None));
        // Past the end: empty.
        let p = page(0..4, q(Some(2), Some(10)), |x| x, link);
        assert_eq!((p.value, p.next_link), (Vec::<i32>::new(), None));
        // initialSkip alone skips, and answers the rest.
        let p = page(0..4, q(None, Some(1)), |x| x, link);
        assert_eq!((p.value, p.next_link), (vec![1, 2, 3], None));
    }

    #[test]
    fn page_size_bounds() {
        assert!(q(Some(0), None).validate().is_err());
        assert!(q(Some(MAX_PAGE_SIZE + 1), None).validate().is_err());
        assert!(q(Some(1), None).validate().is_ok());
        assert!(q(Some(MAX_PAGE_SIZE), None).validate().is_ok());
        assert!(q(None, Some(7)).validate().is_ok());
    }

    #[test]
    fn encodes_query_values() {
        assert_eq!(encode("alice@contoso.com"), "alice%40contoso.com");
        assert_eq!(encode("a b&c=d"), "a%20b%26c%3Dd");
        assert_eq!(encode("h-1_x.y~"), "h-1_x.y~");
    }
}
