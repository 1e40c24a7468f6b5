//! A minimal blocking HTTP/1.1 client for talking to an Ember server from the CLI
//! (`ember query`, until it moves to `ember-http`).
//!
//! Owns one keep-alive connection per [`HttpClient`]: requests carry `Content-Length`,
//! responses are read by `Content-Length` or chunked encoding. A request on a reused
//! connection that the server closed meanwhile is retried once on a fresh connection. No TLS:
//! this talks to `http://` servers only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Errors of [`HttpClient`].
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server URL is not `http://host:port[/prefix]`.
    #[error("bad server URL {url:?}: {why}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Connecting, writing or reading failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The server's answer is not valid HTTP/1.1.
    #[error("malformed response from {addr}: {why}")]
    Protocol {
        /// The server address.
        addr: String,
        /// What was wrong.
        why: String,
    },
}

/// One HTTP response.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Header `(lowercase name, value)` pairs in order.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// Value of the first header called `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A blocking keep-alive HTTP/1.1 connection to one server.
#[derive(Debug)]
pub struct HttpClient {
    addr: String,
    prefix: String,
    timeout: Duration,
    conn: Option<BufReader<TcpStream>>,
}

impl HttpClient {
    /// A client for `http://host:port[/prefix]` (no connection is made yet).
    pub fn new(url: &str) -> Result<HttpClient, ClientError> {
        let bad = |why| ClientError::Url {
            url: url.to_string(),
            why,
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// URLs are supported"))?;
        let (addr, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if addr.is_empty() {
            return Err(bad("missing host"));
        }
        let addr = if addr.contains(':') && !addr.ends_with(']') {
            addr.to_string()
        } else {
            format!("{addr}:80")
        };
        Ok(HttpClient {
            addr,
            prefix: prefix.to_string(),
            timeout: Duration::from_secs(300),
            conn: None,
        })
    }

    /// The `host:port` this client talks to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    fn connect(&self) -> Result<BufReader<TcpStream>, ClientError> {
        let io = |source| ClientError::Io {
            context: format!("connecting to {}", self.addr),
            source,
        };
        let stream = TcpStream::connect(&self.addr).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(Some(self.timeout)).map_err(io)?;
        Ok(BufReader::with_capacity(64 * 1024, stream))
    }

    /// Sends one request (`path` includes the query string) and reads the whole response.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<HttpResponse, ClientError> {
        let reused = self.conn.is_some();
        match self.try_request(method, path, headers, body) {
            Ok(r) => Ok(r),
            // The server may close an idle keep-alive connection at any time: retry once.
            Err(ClientError::Io { .. }) if reused => {
                self.conn = None;
                self.try_request(method, path, headers, body)
            }
            Err(e) => {
                self.conn = None;
                Err(e)
            }
        }
    }

    fn try_request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<HttpResponse, ClientError> {
        if self.conn.is_none() {
            self.conn = Some(self.connect()?);
        }
        let addr = self.addr.clone();
        let mut head = format!(
            "{method} {}{path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n",
            self.prefix,
            body.len()
        );
        for (k, v) in headers {
            head.push_str(k);
            head.push_str(": ");
            head.push_str(v);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let conn = self.conn.as_mut().ok_or_else(|| ClientError::Protocol {
            addr: addr.clone(),
            why: "no connection".into(),
        })?;
        let io = |source| ClientError::Io {
            context: format!("{method} {path} to {addr}"),
            source,
        };
        {
            let stream = conn.get_mut();
            // One write for small requests keeps them in one segment.
            if body.len() < 16 * 1024 {
                let mut all = head.into_bytes();
                all.extend_from_slice(body);
                stream.write_all(&all).map_err(io)?;
            } else {
                stream.write_all(head.as_bytes()).map_err(io)?;
                stream.write_all(body).map_err(io)?;
            }
        }
        let response = read_response(conn, &addr, method == "HEAD").map_err(|e| match e {
            ReadError::Io(source) => io(source),
            ReadError::Protocol(why) => ClientError::Protocol {
                addr: addr.clone(),
                why,
            },
        })?;
        let close = response
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        if close {
            self.conn = None;
        }
        Ok(response)
    }
}

enum ReadError {
    Io(std::io::Error),
    Protocol(String),
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Io(e)
    }
}

fn read_line(r: &mut impl BufRead, line: &mut String) -> Result<(), ReadError> {
    line.clear();
    if r.read_line(line)? == 0 {
        return Err(ReadError::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed",
        )));
    }
    Ok(())
}

fn read_response(
    r: &mut BufReader<TcpStream>,
    _addr: &str,
    head_only: bool,
) -> Result<HttpResponse, ReadError> {
    let mut line = String::new();
    read_line(r, &mut line)?;
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| ReadError::Protocol(format!("bad status line {:?}", line.trim_end())))?;
    let mut headers = Vec::new();
    loop {
        read_line(r, &mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l
            .split_once(':')
            .ok_or_else(|| ReadError::Protocol(format!("bad header line {l:?}")))?;
        headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let mut body = Vec::new();
    if head_only || status == 204 || status == 304 || (100..200).contains(&status) {
    } else if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            read_line(r, &mut line)?;
            let size_text = line.trim_end().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size_text.trim(), 16)
                .map_err(|_| ReadError::Protocol(format!("bad chunk size {size_text:?}")))?;
            if size == 0 {
                // Trailers, if any, end with an empty line.
                loop {
                    read_line(r, &mut line)?;
                    if line.trim_end().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..])?;
            read_line(r, &mut line)?;
        }
    } else if let Some(len) = get("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| ReadError::Protocol(format!("bad Content-Length {len:?}")))?;
        body.resize(len, 0);
        r.read_exact(&mut body)?;
    } else {
        r.read_to_end(&mut body)?;
    }
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// Percent-encodes a query parameter value.
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
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

    #[test]
    fn urls() {
        let c = HttpClient::new("http://127.0.0.1:4040").unwrap();
        assert_eq!(c.addr(), "127.0.0.1:4040");
        let c = HttpClient::new("http://localhost/prefix/").unwrap();
        assert_eq!(c.addr(), "localhost:80");
        assert_eq!(c.prefix, "/prefix");
        assert!(HttpClient::new("https://x").is_err());
        assert!(HttpClient::new("http://").is_err());
        assert_eq!(url_encode("{a=\"b c\"}"), "%7Ba%3D%22b%20c%22%7D");
    }
}
