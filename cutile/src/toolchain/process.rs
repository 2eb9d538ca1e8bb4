//! Running NVIDIA's tools as child processes: a cleaned environment, a private working and temp
//! directory, a time limit that kills the whole process group (tileiras spawns ptxas), and the
//! shell command that reproduces a run by hand.

use std::ffi::{OsStr, OsString};
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::error::ExitKind;

/// Variables that redirect tileiras's libNVVM search to another CUDA tree (toolchain.md §5.1); a
/// mismatched toolkit there makes every compile fail with a bare exit 5.
pub const CLEARED_ENV: [&str; 3] = ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"];

/// A command for one of the tools: CUDA_* variables removed, `TMPDIR` and the working directory set
/// to `workdir` so that its temporary files die with that directory.
pub(crate) fn tool_command(program: &Path, workdir: &Path) -> Command {
    let mut cmd = Command::new(program);
    for v in CLEARED_ENV {
        cmd.env_remove(v);
    }
    cmd.env("TMPDIR", workdir).current_dir(workdir);
    cmd
}

/// What a finished run produced.
#[derive(Debug)]
pub(crate) struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub elapsed: Duration,
}

/// A run either finishes or is killed at the time limit.
#[derive(Debug)]
pub(crate) enum RunOutcome {
    Finished(Finished),
    TimedOut { stderr: Vec<u8> },
}

pub(crate) fn exit_kind(status: &ExitStatus) -> ExitKind {
    if let Some(c) = status.code() {
        return ExitKind::Code(c);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(s) = status.signal() {
            return ExitKind::Signal(s);
        }
    }
    ExitKind::Code(-1)
}

fn spawn_in_own_group(cmd: &mut Command) -> io::Result<Child> {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group, so that a timeout kill reaches ptxas too and no grandchild keeps
        // our pipes open.
        cmd.process_group(0);
    }
    cmd.spawn()
}

fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    {
        // The child has not been reaped yet, so its pid (= the group id) cannot have been reused.
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    let _ = child.kill();
}

fn read_all(mut r: impl Read + Send + 'static) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

/// Runs `cmd` to completion or until `timeout`, capturing stdout and stderr.
pub(crate) fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> io::Result<RunOutcome> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = spawn_in_own_group(cmd)?;
    let out = child.stdout.take().map(read_all);
    let err = child.stderr.take().map(read_all);
    let join =
        |h: Option<thread::JoinHandle<Vec<u8>>>| h.and_then(|h| h.join().ok()).unwrap_or_default();

    // Poll with a short, growing interval: compiles take 0.1 s to seconds, so a few ms of latency
    // is noise, and this avoids a waiter thread per run.
    let mut nap = Duration::from_micros(500);
    loop {
        if let Some(status) = child.try_wait()? {
            let elapsed = start.elapsed();
            return Ok(RunOutcome::Finished(Finished {
                status,
                stdout: join(out),
                stderr: join(err),
                elapsed,
            }));
        }
        let elapsed = start.elapsed();
        if elapsed >= timeout {
            kill_group(&mut child);
            let _ = child.wait();
            let _ = join(out);
            return Ok(RunOutcome::TimedOut { stderr: join(err) });
        }
        thread::sleep(nap.min(timeout - elapsed));
        nap = (nap * 2).min(Duration::from_millis(10));
    }
}

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Runs `cmd` to completion, handing each output line to `on_line` as it arrives (progress of long
/// runs such as pip) and returning the exit status and the last `keep` stderr lines.
pub(crate) fn run_streaming(
    cmd: &mut Command,
    keep: usize,
    on_line: &mut dyn FnMut(Stream, &str),
) -> io::Result<(ExitStatus, Vec<String>)> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let (tx, rx) = mpsc::channel::<(Stream, String)>();
    let mut readers = Vec::new();
    if let Some(o) = child.stdout.take() {
        readers.push(forward_lines(o, Stream::Stdout, tx.clone()));
    }
    if let Some(e) = child.stderr.take() {
        readers.push(forward_lines(e, Stream::Stderr, tx.clone()));
    }
    drop(tx);
    let mut tail: Vec<String> = Vec::new();
    for (stream, line) in rx {
        on_line(stream, &line);
        if stream == Stream::Stderr && !line.trim().is_empty() {
            if tail.len() == keep {
                tail.remove(0);
            }
            tail.push(line);
        }
    }
    for r in readers {
        let _ = r.join();
    }
    Ok((child.wait()?, tail))
}

fn forward_lines(
    r: impl Read + Send + 'static,
    stream: Stream,
    tx: mpsc::Sender<(Stream, String)>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut reader = BufReader::new(r);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    let line = line.trim_end_matches(['\n', '\r']).to_owned();
                    if tx.send((stream, line)).is_err() {
                        break;
                    }
                }
            }
        }
    })
}

/// Quotes one word for a POSIX shell, leaving plain words readable.
pub(crate) fn shell_quote(word: &OsStr) -> String {
    let s = word.to_string_lossy();
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./=:,+@%".contains(&b));
    if plain {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The shell command that reruns `program args` with the environment cleaning the driver applies.
pub(crate) fn reproduce_command(program: &Path, args: &[OsString]) -> String {
    let mut words: Vec<String> = vec!["env".into()];
    for v in CLEARED_ENV {
        words.push("-u".into());
        words.push(v.into());
    }
    words.push(shell_quote(program.as_os_str()));
    words.extend(args.iter().map(|a| shell_quote(a)));
    words.join(" ")
}

/// The `error: ` lines of a tool's stderr, prefix removed; when there are none, its last few
/// non-empty lines (e.g. LLVM option errors, which have another prefix).
pub(crate) fn error_messages(stderr: &str) -> Vec<String> {
    let errors: Vec<String> = stderr
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("error: "))
        .map(|m| m.trim().to_owned())
        .collect();
    if !errors.is_empty() {
        return errors;
    }
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(5)..]
        .iter()
        .map(|l| l.trim().to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        let cases = [
            ("/a/b-c_d.tilebc", "/a/b-c_d.tilebc"),
            ("--gpu-name=sm_90", "--gpu-name=sm_90"),
            ("a b", "'a b'"),
            ("it's", r"'it'\''s'"),
            ("", "''"),
            ("$HOME", "'$HOME'"),
        ];
        for (w, q) in cases {
            assert_eq!(shell_quote(OsStr::new(w)), q);
        }
        let cmd = reproduce_command(Path::new("/t/tileiras"), &["-o".into(), "x y".into()]);
        assert_eq!(
            cmd,
            "env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT /t/tileiras -o 'x y'"
        );
    }

    #[test]
    fn messages() {
        let s = "warning: w\nerror: error at offset 66: bad\nerror: input does not correspond to Tile IR bytecode\n";
        assert_eq!(
            error_messages(s),
            vec![
                "error at offset 66: bad",
                "input does not correspond to Tile IR bytecode"
            ]
        );
        let s = "tileiras: for the --gpu-name option: Cannot find option named 'sm_75'!\n\n";
        assert_eq!(
            error_messages(s),
            vec!["tileiras: for the --gpu-name option: Cannot find option named 'sm_75'!"]
        );
        assert!(error_messages("").is_empty());
    }
}
