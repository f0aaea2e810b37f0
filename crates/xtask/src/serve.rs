//! A tiny static file server for the web app: GET/HEAD of files under the
//! repository root, one thread per connection, bound to 127.0.0.1 only.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct Server {
    root: PathBuf,
    listener: TcpListener,
    port: u16,
}

impl Server {
    /// Binds `port` on 127.0.0.1 (0: any free port); a busy port falls back
    /// to a free one so a second `serve` still starts.
    pub fn bind(root: &Path, port: u16) -> Result<Server, String> {
        let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            Ok(l) => l,
            Err(e) if port != 0 && e.kind() == std::io::ErrorKind::AddrInUse => {
                eprintln!("xtask: port {port} is busy, using a free one");
                TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                    .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?
            }
            Err(e) => return Err(format!("cannot listen on 127.0.0.1:{port}: {e}")),
        };
        let port = listener
            .local_addr()
            .map(|a: SocketAddr| a.port())
            .map_err(|e| format!("cannot read the bound address: {e}"))?;
        Ok(Server {
            root: root.to_path_buf(),
            listener,
            port,
        })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Serves forever.
    pub fn run(self) {
        for stream in self.listener.incoming().flatten() {
            let root = self.root.clone();
            std::thread::spawn(move || {
                // A client that goes away mid-response is not our problem.
                let _ = handle(&root, stream);
            });
        }
    }
}

fn handle(root: &Path, mut stream: TcpStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // Drain the headers; nothing in them matters for static files.
    let mut line = String::new();
    let mut header_bytes = 0;
    while reader.read_line(&mut line)? > 2 && header_bytes < 64 * 1024 {
        header_bytes += line.len();
        line.clear();
    }
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "GET" && method != "HEAD" {
        return respond(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain",
            b"GET or HEAD only\n",
            true,
        );
    }
    let Some(path) = resolve(root, target) else {
        return respond(
            &mut stream,
            "404 Not Found",
            "text/plain",
            b"not found\n",
            true,
        );
    };
    match std::fs::read(&path) {
        Ok(body) => respond(&mut stream, "200 OK", mime(&path), &body, method == "GET"),
        Err(_) => respond(
            &mut stream,
            "404 Not Found",
            "text/plain",
            b"not found\n",
            true,
        ),
    }
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &[u8],
    with_body: bool,
) -> std::io::Result<()> {
    // no-store: a rebuilt web/pkg must never be mixed with cached glue.
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if with_body {
        stream.write_all(body)?;
    }
    stream.flush()
}

/// Maps a request target to a file under `root`. Refuses `..`, hidden
/// entries (.git, .cargo) and `target/`, so only the app's files are served.
fn resolve(root: &Path, target: &str) -> Option<PathBuf> {
    let path = target.split(['?', '#']).next()?;
    let path = percent_decode(path.strip_prefix('/')?)?;
    let mut file = root.to_path_buf();
    for (i, segment) in path.split('/').enumerate() {
        if segment.is_empty() {
            continue;
        }
        if segment.starts_with('.') || segment.contains('\\') || (i == 0 && segment == "target") {
            return None;
        }
        file.push(segment);
    }
    if file.is_dir() {
        file.push("index.html");
    }
    file.is_file().then_some(file)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn mime(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "wasm" => "application/wasm",
        "json" | "map" => "application/json",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "svg" => "image/svg+xml",
        "ico" => "image/x-icon",
        "md" | "txt" | "ts" => "text/plain; charset=utf-8",
        "tif" | "tiff" => "image/tiff",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_app() {
        let root = crate::web::root();
        assert_eq!(
            resolve(&root, "/"),
            Some(root.join("index.html")).filter(|p| p.is_file())
        );
        assert!(resolve(&root, "/../etc/passwd").is_none());
        assert!(resolve(&root, "/.git/config").is_none());
        assert!(resolve(&root, "/target/x").is_none());
        assert!(resolve(&root, "/%2e%2e/x").is_none());
        assert!(resolve(&root, "no-slash").is_none());
        assert!(resolve(&root, "/Cargo.toml?x=1").is_some());
    }

    #[test]
    fn wasm_has_its_mime_type() {
        assert_eq!(mime(Path::new("a/b.wasm")), "application/wasm");
        assert_eq!(mime(Path::new("app.js")), "text/javascript; charset=utf-8");
        assert_eq!(percent_decode("a%20b").as_deref(), Some("a b"));
        assert_eq!(percent_decode("%zz"), None);
    }
}
