//! The built-in Content-Type table of the static backend (common web extensions; anything else is
//! `application/octet-stream`).

/// The Content-Type for a file name, by its extension (case-insensitive).
pub fn content_type(name: &str) -> &'static str {
    let ext = match name.rsplit_once('.') {
        Some((_, e)) if !e.contains('/') => e,
        _ => return "application/octet-stream",
    };
    let mut lower = [0u8; 8];
    if ext.len() > lower.len() {
        return "application/octet-stream";
    }
    for (d, s) in lower.iter_mut().zip(ext.bytes()) {
        *d = s.to_ascii_lowercase();
    }
    match &lower[..ext.len()] {
        b"html" | b"htm" => "text/html; charset=utf-8",
        b"css" => "text/css; charset=utf-8",
        b"js" | b"mjs" => "text/javascript; charset=utf-8",
        b"json" | b"map" => "application/json",
        b"txt" | b"text" | b"log" => "text/plain; charset=utf-8",
        b"md" => "text/markdown; charset=utf-8",
        b"csv" => "text/csv; charset=utf-8",
        b"xml" => "application/xml",
        b"svg" => "image/svg+xml",
        b"png" => "image/png",
        b"jpg" | b"jpeg" => "image/jpeg",
        b"gif" => "image/gif",
        b"webp" => "image/webp",
        b"avif" => "image/avif",
        b"ico" => "image/x-icon",
        b"bmp" => "image/bmp",
        b"pdf" => "application/pdf",
        b"wasm" => "application/wasm",
        b"woff" => "font/woff",
        b"woff2" => "font/woff2",
        b"ttf" => "font/ttf",
        b"otf" => "font/otf",
        b"mp4" => "video/mp4",
        b"webm" => "video/webm",
        b"mp3" => "audio/mpeg",
        b"ogg" => "audio/ogg",
        b"wav" => "audio/wav",
        b"zip" => "application/zip",
        b"gz" => "application/gzip",
        b"tar" => "application/x-tar",
        b"bin" => "application/octet-stream",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::content_type;

    #[test]
    fn table() {
        assert_eq!(content_type("a/index.HTML"), "text/html; charset=utf-8");
        assert_eq!(content_type("x.png"), "image/png");
        assert_eq!(content_type("x.tar.gz"), "application/gzip");
        assert_eq!(content_type("noext"), "application/octet-stream");
        assert_eq!(content_type("dir.d/noext"), "application/octet-stream");
        assert_eq!(
            content_type("x.verylongextension"),
            "application/octet-stream"
        );
    }
}
