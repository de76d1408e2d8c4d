//! The files route (its wire: `duet_wire::file`): a sandbox's files read,
//! written and deleted by path, beside the shell and without taking its
//! turn (so a long command does not hold up an editor; a restore or a
//! destroy that replaces the workspace meanwhile leaves a request acting on
//! the old one). How a path is kept inside the workspace is `beneath`'s;
//! this is the HTTP around it.
//!
//! The query takes `path` (percent-encoded, `+` a space, as forms encode
//! it; required, "" being the workspace) and, for `DELETE` only,
//! `recursive=true|false`; anything else is a 400. Like a command, a file
//! request creates the sandbox's workspace if it has none yet: a room's
//! files are there from the start, empty, so a listing of a new room is
//! empty rather than missing.
//!
//! `GET` of a file answers its bytes with their `Content-Length`, from the
//! descriptor opened, so a file replaced meanwhile is read whole as it was;
//! `Range: bytes=a-b`, `a-` or `-n` (one range) answers 206 with that part
//! and `Content-Range`, from a file of any size, and 416 (with `bytes
//! */size`) for a range that starts past its end; a header that is not one
//! such range is a 400. `PUT` streams its body into a new file, which
//! replaces the target once whole; a body must be whole within
//! [`BODY_WAIT`] (408 past it) and at most `MAX_FILE_BYTES` (413).

mod beneath;

use std::io::{Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use duet_wire::file::{FileChanged, MAX_FILE_BYTES, PATH, RECURSIVE};
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Bytes, Incoming};
use hyper::header::{
    HeaderValue, ACCEPT_RANGES, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, RANGE,
};
use hyper::{Method, Request, Response, StatusCode};
use tokio::io::AsyncWriteExt;

use self::beneath::{Found, RelPath, Workspace};
use crate::error::Error;
use crate::http::{declared_length, json, send_file, Body};
use crate::sandboxes::Sandboxes;
use crate::workspace;

/// How long a written file's body may take to arrive, whole.
pub const BODY_WAIT: Duration = Duration::from_secs(60);

pub async fn handle(
    sandboxes: &Sandboxes,
    name: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, Error> {
    let deleting = req.method() == Method::DELETE;
    let (path, recursive) = query(req.uri().query(), deleting)?;
    let root = sandboxes.workspace_of(name)?;
    match *req.method() {
        Method::GET => get(root, path, req).await,
        Method::PUT => put(root, path, req).await,
        _ => {
            let shown = path.shown();
            workspace::blocking(move || open(&root)?.delete(&path, recursive)).await?;
            let deleted = FileChanged {
                path: shown,
                size: None,
                deleted: true,
            };
            Ok(json(StatusCode::OK, &deleted))
        }
    }
}

/// The sandbox's workspace, created if it has none.
fn open(root: &std::path::Path) -> Result<Workspace, Error> {
    workspace::create(root)?;
    Workspace::open(root)
}

async fn get(
    root: PathBuf,
    path: RelPath,
    req: Request<Incoming>,
) -> Result<Response<Body>, Error> {
    let range = req.headers().get(RANGE).map(Range::parse).transpose()?;
    let shown = path.shown();
    let (mut file, size) = match workspace::blocking(move || open(&root)?.read(&path)).await? {
        Found::Dir(list) => return Ok(json(StatusCode::OK, &list)),
        Found::File { file, size } => (file, size),
    };
    let mut response = Response::builder()
        .header(CONTENT_TYPE, "application/octet-stream")
        .header(ACCEPT_RANGES, "bytes");
    let (start, len) = match range {
        None if size > MAX_FILE_BYTES => {
            return Err(Error::FileTooLarge {
                path: shown,
                size,
                limit: MAX_FILE_BYTES,
            })
        }
        None => (0, size),
        Some(range) => {
            let (first, last) = range.within(size)?;
            response = response
                .status(StatusCode::PARTIAL_CONTENT)
                .header(CONTENT_RANGE, format!("bytes {first}-{last}/{size}"));
            (first, last - first + 1)
        }
    };
    if start > 0 {
        file.seek(SeekFrom::Start(start))
            .map_err(|e| Error::Internal(format!("{shown}: {e}")))?;
    }
    response
        .header(CONTENT_LENGTH, len)
        .body(send_file(file, len))
        .map_err(|e| Error::Internal(e.to_string()))
}

async fn put(
    root: PathBuf,
    path: RelPath,
    req: Request<Incoming>,
) -> Result<Response<Body>, Error> {
    if declared_length(&req).is_some_and(|len| len > MAX_FILE_BYTES) {
        return Err(Error::BodyTooLarge {
            limit: MAX_FILE_BYTES,
        });
    }
    let shown = path.shown();
    let started = workspace::blocking(move || open(&root)?.start_write(&path)).await;
    let mut body = req.into_body();
    let (pending, file) = match started {
        Ok(started) => started,
        Err(e) => {
            // Read (within the bounds) so that a client still sending
            // gets the answer rather than a connection reset.
            let _ = receive(&mut body, None, BODY_WAIT).await;
            return Err(e);
        }
    };
    // On an error the pending file is dropped, which removes it.
    let size = receive(&mut body, Some(file), BODY_WAIT).await?;
    workspace::blocking(move || pending.commit()).await?;
    let written = FileChanged {
        path: shown,
        size: Some(size),
        deleted: false,
    };
    Ok(json(StatusCode::OK, &written))
}

/// Writes `body` into `file` (or only reads it, without one) and returns
/// its length: 413 past `MAX_FILE_BYTES`, 408 if it is not whole within
/// `wait`.
async fn receive<B>(body: &mut B, file: Option<std::fs::File>, wait: Duration) -> Result<u64, Error>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut file = file.map(tokio::fs::File::from_std);
    let written = async {
        let mut received = 0u64;
        while let Some(frame) = body.frame().await {
            let frame = frame
                .map_err(|e| Error::BadRequest(format!("could not read the request body: {e}")))?;
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            received += data.len() as u64;
            if received > MAX_FILE_BYTES {
                return Err(Error::BodyTooLarge {
                    limit: MAX_FILE_BYTES,
                });
            }
            if let Some(file) = &mut file {
                file.write_all(&data).await.map_err(write_error)?;
            }
        }
        if let Some(file) = &mut file {
            // The last write is done before the file is put in place.
            file.flush().await.map_err(write_error)?;
        }
        Ok(received)
    };
    tokio::time::timeout(wait, written)
        .await
        .map_err(|_| Error::BodyTooSlow {
            ms: wait.as_millis() as u64,
        })?
}

fn write_error(e: std::io::Error) -> Error {
    Error::Internal(format!("could not write the file: {e}"))
}

/// The path, and whether a delete is recursive.
fn query(query: Option<&str>, deleting: bool) -> Result<(RelPath, bool), Error> {
    let (mut path, mut recursive) = (None, None);
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let slot = match key {
            PATH => &mut path,
            RECURSIVE if deleting => &mut recursive,
            _ => {
                return Err(Error::BadRequest(format!(
                    "unknown query parameter {pair:?}; {PATH} is accepted{}",
                    if deleting { ", and recursive" } else { "" }
                )))
            }
        };
        if slot.replace(value).is_some() {
            return Err(Error::BadRequest(format!("{key} is given twice")));
        }
    }
    let path = path.ok_or_else(|| Error::BadRequest(format!("{PATH} is required")))?;
    let recursive = match recursive {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            return Err(Error::BadRequest(format!(
                "{RECURSIVE} must be true or false"
            )))
        }
    };
    Ok((RelPath::parse(&decode(path)?)?, recursive))
}

/// A percent-encoded query value as bytes (`+` is a space).
fn decode(value: &str) -> Result<Vec<u8>, Error> {
    let bytes = value.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = |at: usize| bytes.get(at).and_then(|&b| (b as char).to_digit(16));
                let (Some(high), Some(low)) = (hex(i + 1), hex(i + 2)) else {
                    return Err(Error::BadRequest(
                        "invalid percent-encoding in the query".into(),
                    ));
                };
                decoded.push((high * 16 + low) as u8);
                i += 3;
            }
            b'+' => {
                decoded.push(b' ');
                i += 1;
            }
            b => {
                decoded.push(b);
                i += 1;
            }
        }
    }
    Ok(decoded)
}

/// One byte range of a `Range` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Range {
    /// `a-b`, or `a-` to the end.
    From(u64, Option<u64>),
    /// `-n`: the last n bytes.
    Last(u64),
}

impl Range {
    fn parse(header: &HeaderValue) -> Result<Range, Error> {
        let invalid = || {
            Error::BadRequest(
                "Range must be one range of bytes: bytes=a-b, bytes=a- or bytes=-n".into(),
            )
        };
        let number = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| s.parse::<u64>().ok())
                .flatten()
                .ok_or_else(invalid)
        };
        let spec = header
            .to_str()
            .ok()
            .and_then(|h| h.trim().strip_prefix("bytes="));
        let (first, last) = spec.and_then(|s| s.split_once('-')).ok_or_else(invalid)?;
        let (first, last) = (first.trim(), last.trim());
        match (first.is_empty(), last.is_empty()) {
            (true, true) => Err(invalid()),
            (true, false) => Ok(Range::Last(number(last)?)),
            (false, true) => Ok(Range::From(number(first)?, None)),
            (false, false) => match (number(first)?, number(last)?) {
                (first, last) if last < first => Err(invalid()),
                (first, last) => Ok(Range::From(first, Some(last))),
            },
        }
    }

    /// The first and last byte of the range in a file of `size` bytes.
    fn within(self, size: u64) -> Result<(u64, u64), Error> {
        let unsatisfiable = Error::RangeNotSatisfiable { size };
        match self {
            Range::From(first, _) if first >= size => Err(unsatisfiable),
            Range::From(first, last) => Ok((first, last.unwrap_or(u64::MAX).min(size - 1))),
            Range::Last(0) => Err(unsatisfiable),
            Range::Last(_) if size == 0 => Err(unsatisfiable),
            Range::Last(n) => Ok((size.saturating_sub(n), size - 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::channel::Channel;

    fn range(header: &str) -> Result<Range, Error> {
        Range::parse(&HeaderValue::from_str(header).unwrap())
    }

    #[test]
    fn ranges_parse_and_fit_the_file() {
        let fits = |header: &str, size| range(header).and_then(|r| r.within(size)).ok();
        assert_eq!(fits("bytes=0-0", 10), Some((0, 0)));
        assert_eq!(fits("bytes=2-5", 10), Some((2, 5)));
        assert_eq!(fits("bytes=2-50", 10), Some((2, 9)));
        assert_eq!(fits("bytes=7-", 10), Some((7, 9)));
        assert_eq!(fits("bytes=-3", 10), Some((7, 9)));
        assert_eq!(fits("bytes=-30", 10), Some((0, 9)));
        for (header, size) in [
            ("bytes=10-", 10),
            ("bytes=0-", 0),
            ("bytes=-0", 10),
            ("bytes=-1", 0),
        ] {
            assert!(
                matches!(
                    range(header).and_then(|r| r.within(size)),
                    Err(Error::RangeNotSatisfiable { .. })
                ),
                "{header} of {size}"
            );
        }
        for bad in [
            "bytes=",
            "bytes=-",
            "bytes=5-2",
            "bytes=0-1,3-4",
            "items=0-1",
            "bytes=+1-2",
            "bytes=a-b",
        ] {
            assert!(matches!(range(bad), Err(Error::BadRequest(_))), "{bad}");
        }
    }

    #[test]
    fn queries_take_a_path_and_for_a_delete_recursive() {
        let shown = |q: &str, deleting| query(Some(q), deleting).map(|(p, r)| (p.shown(), r)).ok();
        assert_eq!(
            shown("path=a%2Fb+c.txt", false),
            Some(("a/b c.txt".into(), false))
        );
        assert_eq!(shown("path=", false), Some((String::new(), false)));
        assert_eq!(
            shown("path=d&recursive=true", true),
            Some(("d".into(), true))
        );
        assert_eq!(
            shown("recursive=false&path=d", true),
            Some(("d".into(), false))
        );
        for (bad, deleting) in [
            ("", false),
            ("path=a&recursive=true", false),
            ("path=a&recursive=yes", true),
            ("path=a&path=b", false),
            ("path=a&x=1", false),
            ("path=%zz", false),
            ("path=%2", false),
            ("path=%2e%2e", false),
            ("path=a%00b", false),
        ] {
            assert!(
                matches!(query(Some(bad), deleting), Err(Error::BadRequest(_))),
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn a_body_that_trickles_is_given_up() {
        let (mut sender, mut body) = Channel::<Bytes>::new(1);
        let trickle = tokio::spawn(async move {
            loop {
                if sender.send_data(Bytes::from_static(b"x")).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        let received = receive(&mut body, None, Duration::from_millis(100)).await;
        assert!(
            matches!(received, Err(Error::BodyTooSlow { .. })),
            "{received:?}"
        );
        trickle.abort();
    }
}
