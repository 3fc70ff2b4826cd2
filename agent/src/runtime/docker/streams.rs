//! What flows in and out of a running container: one-shot exec (for
//! probes and hooks), logs (tail and stream), and interactive exec and
//! attach sessions with their terminal size and exit code.

use std::time::Duration;

use bollard::container::LogOutput;
use bollard::errors::Error as BollardError;
use bollard::exec::{CreateExecOptions, ResizeExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::{AttachContainerOptions, LogsOptions, ResizeContainerTTYOptions};
use bollard::Docker;
use futures::{StreamExt, TryStreamExt};

use super::errors::{docker_err, not_found_or, status};
use super::DockerRuntime;
use crate::runtime::{
    ByteStream, ExecOutput, LogOptions, Output, Result, RuntimeError, Session, SessionId,
    StreamFlags,
};

impl DockerRuntime {
    pub(super) async fn exec_once(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecOutput> {
        let docker = self.client().await?;
        let exec_id = create_exec(
            docker,
            id,
            CreateExecOptions {
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                cmd: Some(cmd.to_vec()),
                ..Default::default()
            },
        )
        .await?;
        let run = async {
            let mut stdout = Vec::new();
            let mut stderr = Vec::new();
            match docker
                .start_exec(&exec_id, None::<StartExecOptions>)
                .await
                .map_err(docker_err)?
            {
                StartExecResults::Attached { mut output, .. } => {
                    while let Some(chunk) = output.next().await {
                        match chunk.map_err(docker_err)? {
                            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                                stdout.extend_from_slice(&message)
                            }
                            LogOutput::StdErr { message } => stderr.extend_from_slice(&message),
                            LogOutput::StdIn { .. } => {}
                        }
                    }
                }
                StartExecResults::Detached => {}
            }
            // The output ends when the process does; its exit code shows up
            // in the exec's inspect a moment later at most.
            loop {
                let inspect = docker.inspect_exec(&exec_id).await.map_err(docker_err)?;
                if inspect.running != Some(true) {
                    if let Some(code) = inspect.exit_code {
                        return Ok(ExecOutput {
                            exit_code: code,
                            stdout,
                            stderr,
                        });
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(timeout, run)
            .await
            .map_err(|_| RuntimeError::Timeout(timeout))?
    }

    pub(super) async fn tail_logs(&self, id: &str, tail: usize) -> Result<String> {
        let options = LogsOptions {
            stdout: true,
            stderr: true,
            tail: tail.to_string(),
            ..Default::default()
        };
        let chunks: Vec<LogOutput> = self
            .client()
            .await?
            .logs(id, Some(options))
            .try_collect()
            .await
            .map_err(|e| not_found_or(e, id))?;
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend_from_slice(&chunk.into_bytes());
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    pub(super) async fn stream_logs(&self, id: &str, options: &LogOptions) -> Result<ByteStream> {
        let docker = self.client().await?;
        // Fail now, with a 404, rather than inside the stream.
        self.inspect_raw(id).await?;
        let docker_options = LogsOptions {
            follow: options.follow,
            stdout: true,
            stderr: true,
            timestamps: options.timestamps,
            tail: options
                .tail_lines
                .map_or_else(|| "all".to_string(), |n| n.to_string()),
            since: options
                .since_unix
                .map_or(0, |t| i32::try_from(t.max(0)).unwrap_or(i32::MAX)),
            ..Default::default()
        };
        let stream = docker
            .logs(id, Some(docker_options))
            .map(|chunk| chunk.map(LogOutput::into_bytes).map_err(docker_err));
        Ok(Box::pin(stream))
    }

    pub(super) async fn start_exec_session(
        &self,
        id: &str,
        cmd: &[String],
        flags: StreamFlags,
    ) -> Result<Session> {
        let docker = self.client().await?;
        let exec_id = create_exec(
            docker,
            id,
            CreateExecOptions {
                attach_stdin: Some(flags.stdin),
                attach_stdout: Some(flags.stdout),
                attach_stderr: Some(flags.stderr),
                tty: Some(flags.tty),
                cmd: Some(cmd.to_vec()),
                ..Default::default()
            },
        )
        .await?;
        let started = docker
            .start_exec(
                &exec_id,
                Some(StartExecOptions {
                    detach: false,
                    tty: flags.tty,
                    output_capacity: Some(64 * 1024),
                }),
            )
            .await
            .map_err(docker_err)?;
        match started {
            StartExecResults::Attached { output, input } => Ok(Session {
                id: SessionId::Exec(exec_id),
                output: Box::pin(output.filter_map(|c| async move { session_output(c) })),
                input,
            }),
            StartExecResults::Detached => Err(RuntimeError::Docker(
                "Docker started the exec detached".into(),
            )),
        }
    }

    pub(super) async fn attach(&self, id: &str, flags: StreamFlags) -> Result<Session> {
        let docker = self.client().await?;
        let attached = docker
            .attach_container(
                id,
                Some(AttachContainerOptions {
                    stdin: flags.stdin,
                    stdout: flags.stdout,
                    stderr: flags.stderr,
                    stream: true,
                    logs: false,
                    detach_keys: None,
                }),
            )
            .await
            .map_err(|e| not_found_or(e, id))?;
        Ok(Session {
            id: SessionId::Attach(id.to_string()),
            output: Box::pin(
                attached
                    .output
                    .filter_map(|c| async move { session_output(c) }),
            ),
            input: attached.input,
        })
    }

    pub(super) async fn resize(&self, session: &SessionId, width: u16, height: u16) -> Result<()> {
        let docker = self.client().await?;
        match session {
            SessionId::Exec(exec) => docker
                .resize_exec(exec, ResizeExecOptions { height, width })
                .await
                .map_err(docker_err),
            SessionId::Attach(id) => docker
                .resize_container_tty(
                    id,
                    ResizeContainerTTYOptions {
                        h: i32::from(height),
                        w: i32::from(width),
                    },
                )
                .await
                .map_err(|e| not_found_or(e, id)),
        }
    }

    pub(super) async fn exec_exit_code(&self, session: &SessionId) -> Result<Option<i64>> {
        let SessionId::Exec(exec) = session else {
            return Ok(None);
        };
        let docker = self.client().await?;
        // The output ends when the process does; its exit code shows up in
        // the exec's inspect a moment later at most.
        for _ in 0..250 {
            let inspect = match docker.inspect_exec(exec).await {
                Ok(i) => i,
                Err(e) if status(&e) == Some(404) => return Ok(None),
                Err(e) => return Err(docker_err(e)),
            };
            if inspect.running != Some(true) && inspect.exit_code.is_some() {
                return Ok(inspect.exit_code);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(None)
    }
}

/// A chunk of exec or attach output; a TTY's (`Console`) counts as stdout.
fn session_output(chunk: std::result::Result<LogOutput, BollardError>) -> Option<Result<Output>> {
    match chunk {
        Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => {
            Some(Ok(Output::Stdout(message)))
        }
        Ok(LogOutput::StdErr { message }) => Some(Ok(Output::Stderr(message))),
        Ok(LogOutput::StdIn { .. }) => None,
        Err(e) => Some(Err(docker_err(e))),
    }
}

/// Creates an exec instance in container `id`; returns its id. A missing
/// container is `NotFound`, a stopped one says so.
async fn create_exec(
    docker: &Docker,
    id: &str,
    options: CreateExecOptions<String>,
) -> Result<String> {
    docker
        .create_exec(id, options)
        .await
        .map(|created| created.id)
        .map_err(|e| match status(&e) {
            Some(404) => RuntimeError::NotFound(id.to_string()),
            Some(409) => RuntimeError::Docker(format!("container {id} is not running")),
            _ => docker_err(e),
        })
}
