//! Images: looking one up, pulling one (with its progress), and the pause
//! image, built from `pause/pause.c`, carried inside the agent and
//! imported into the engine when it is missing or differs.

use bollard::body_full;
use bollard::query_parameters::{CreateImageOptions, RemoveImageOptions};
use futures::StreamExt;

use super::errors::{docker_err, message, status};
use super::DockerRuntime;
use crate::runtime::{Result, RuntimeError};

/// The pause program, compiled from `pause/pause.c` by `build.rs`.
static PAUSE_BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pause"));

/// The repository the pause image is imported as; the tag is the agent's
/// version.
pub const PAUSE_REPOSITORY: &str = "bosun.local/pause";

/// Label on the pause image holding a hash of the embedded binary, so an
/// agent whose pause differs from the imported one (same version, new
/// build) imports its own again.
const PAUSE_HASH_LABEL: &str = "io.bosun.pause.hash";

impl DockerRuntime {
    pub(super) async fn inspect_image_id(&self, image: &str) -> Result<Option<String>> {
        match self.client().await?.inspect_image(image).await {
            Ok(img) => Ok(img.id),
            Err(e) if status(&e) == Some(404) => Ok(None),
            Err(e) => Err(docker_err(e)),
        }
    }

    pub(super) async fn pull(
        &self,
        image: &str,
        progress: &(dyn for<'a> Fn(&'a str) + Send + Sync),
    ) -> Result<String> {
        let docker = self.client().await?;
        let (repo, tag) = split_reference(image);
        let options = CreateImageOptions {
            from_image: Some(repo.to_string()),
            tag: Some(tag.to_string()),
            ..Default::default()
        };
        let failed = |message: String| RuntimeError::PullFailed {
            image: image.to_string(),
            message,
        };
        let mut stream = docker.create_image(Some(options), None, None);
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    let mut line = String::new();
                    if let Some(id) = info.id.as_deref().filter(|s| !s.is_empty()) {
                        line.push_str(id);
                        line.push_str(": ");
                    }
                    line.push_str(info.status.as_deref().unwrap_or(""));
                    if let Some(detail) = &info.progress_detail {
                        if let (Some(cur), Some(total)) = (detail.current, detail.total) {
                            if total > 0 {
                                line.push_str(&format!(" {cur}/{total}"));
                            }
                        }
                    }
                    if !line.is_empty() {
                        progress(&line);
                    }
                }
                Err(e) => return Err(failed(message(&e))),
            }
        }
        self.inspect_image_id(image)
            .await?
            .ok_or_else(|| failed("the pull ended but the image is not there".to_string()))
    }

    pub(super) async fn ensure_pause(&self) -> Result<String> {
        if let Some(reference) = self.pause_ok.lock().expect("poisoned").clone() {
            return Ok(reference);
        }
        // One import at a time in this process, so runtimes racing on an
        // engine without the image do not leave dangling copies.
        static IMPORTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _one_at_a_time = IMPORTING.lock().await;
        let reference = self.check_pause().await?;
        *self.pause_ok.lock().expect("poisoned") = Some(reference.clone());
        Ok(reference)
    }

    /// Forgets that the pause image was found (Docker said it is missing).
    pub(super) fn forget_pause(&self) {
        *self.pause_ok.lock().expect("poisoned") = None;
    }

    /// Inspects the pause image and imports this agent's if it is missing
    /// or differs.
    async fn check_pause(&self) -> Result<String> {
        let reference = format!("{PAUSE_REPOSITORY}:{}", env!("CARGO_PKG_VERSION"));
        let hash = format!("{:016x}", fnv1a64(PAUSE_BINARY));
        let docker = self.client().await?;
        let stale = match docker.inspect_image(&reference).await {
            Ok(img) => {
                let have = img
                    .config
                    .and_then(|c| c.labels)
                    .and_then(|l| l.get(PAUSE_HASH_LABEL).cloned());
                if have.as_deref() == Some(hash.as_str()) {
                    return Ok(reference);
                }
                tracing::info!(image = %reference, "the pause image differs from this agent's; importing it again");
                img.id
            }
            Err(e) if status(&e) == Some(404) => None,
            Err(e) => return Err(docker_err(e)),
        };
        self.import_pause(&reference, &hash).await?;
        if let Some(old) = stale {
            // Untagged now; sandboxes still using it keep it alive.
            let _ = docker
                .remove_image(&old, None::<RemoveImageOptions>, None)
                .await;
        }
        Ok(reference)
    }

    async fn import_pause(&self, reference: &str, hash: &str) -> Result<()> {
        let docker = self.client().await?;
        let options = CreateImageOptions {
            from_src: Some("-".to_string()),
            repo: Some(PAUSE_REPOSITORY.to_string()),
            tag: Some(env!("CARGO_PKG_VERSION").to_string()),
            message: Some("bosun pause, imported by bosun-agent".to_string()),
            changes: vec![
                r#"CMD ["/pause"]"#.to_string(),
                format!("LABEL {PAUSE_HASH_LABEL}={hash}"),
            ],
            ..Default::default()
        };
        let tar = single_file_tar("pause", 0o755, PAUSE_BINARY);
        let mut stream = docker.create_image(Some(options), Some(body_full(tar.into())), None);
        while let Some(item) = stream.next().await {
            item.map_err(|e| {
                RuntimeError::Docker(format!("importing the pause image {reference}: {e}"))
            })?;
        }
        Ok(())
    }
}

/// `repo[:tag]` or `repo@digest` → (repo, tag or digest); `latest` when
/// there is neither (Docker would pull every tag otherwise).
fn split_reference(image: &str) -> (&str, &str) {
    if let Some((repo, digest)) = image.split_once('@') {
        return (repo, digest);
    }
    let last_slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[last_slash..].rfind(':') {
        Some(i) => (&image[..last_slash + i], &image[last_slash + i + 1..]),
        None => (image, "latest"),
    }
}

/// A tar archive holding one regular file at its root.
fn single_file_tar(name: &str, mode: u32, data: &[u8]) -> Vec<u8> {
    let mut header = [0u8; 512];
    let put = |h: &mut [u8; 512], at: usize, bytes: &[u8]| {
        h[at..at + bytes.len()].copy_from_slice(bytes);
    };
    put(&mut header, 0, name.as_bytes());
    put(&mut header, 100, format!("{mode:07o}\0").as_bytes());
    put(&mut header, 108, b"0000000\0"); // uid
    put(&mut header, 116, b"0000000\0"); // gid
    put(
        &mut header,
        124,
        format!("{:011o}\0", data.len()).as_bytes(),
    );
    put(&mut header, 136, b"00000000000\0"); // mtime
    put(&mut header, 148, b"        "); // checksum, counted as spaces
    header[156] = b'0'; // regular file
    put(&mut header, 257, b"ustar\0");
    put(&mut header, 263, b"00");
    let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
    put(&mut header, 148, format!("{sum:06o}\0 ").as_bytes());

    let padded = data.len().div_ceil(512) * 512;
    let mut tar = Vec::with_capacity(512 + padded + 1024);
    tar.extend_from_slice(&header);
    tar.extend_from_slice(data);
    tar.resize(512 + padded + 1024, 0);
    tar
}

/// FNV-1a, to tell one pause binary from another.
fn fnv1a64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_into_repo_and_tag() {
        assert_eq!(split_reference("busybox"), ("busybox", "latest"));
        assert_eq!(split_reference("busybox:1.35"), ("busybox", "1.35"));
        assert_eq!(
            split_reference("bosun.local/web:2"),
            ("bosun.local/web", "2")
        );
        assert_eq!(
            split_reference("localhost:5000/web"),
            ("localhost:5000/web", "latest")
        );
        assert_eq!(
            split_reference("localhost:5000/web:3"),
            ("localhost:5000/web", "3")
        );
        assert_eq!(
            split_reference("nginx@sha256:abcd"),
            ("nginx", "sha256:abcd")
        );
    }

    #[test]
    fn tar_header_is_valid_ustar() {
        let tar = single_file_tar("pause", 0o755, b"hello");
        assert_eq!(tar.len(), 512 + 512 + 1024);
        assert_eq!(&tar[0..5], b"pause");
        assert_eq!(&tar[257..263], b"ustar\0");
        assert_eq!(&tar[512..517], b"hello");
        // The checksum is the sum of the header with its own field as spaces.
        let mut h = tar[..512].to_vec();
        let stored = u32::from_str_radix(std::str::from_utf8(&h[148..154]).unwrap(), 8).unwrap();
        h[148..156].copy_from_slice(b"        ");
        assert_eq!(stored, h.iter().map(|&b| u32::from(b)).sum::<u32>());
    }

    #[test]
    fn the_pause_binary_is_embedded() {
        assert!(PAUSE_BINARY.len() > 1000);
        assert_eq!(&PAUSE_BINARY[..4], b"\x7fELF");
    }
}
