//! Progress bars for long steps (`indicatif`); drawn on stderr only when it is a terminal, so captured
//! device output holds just the result lines.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

fn target() -> ProgressDrawTarget {
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// A bar of `len` steps labelled `what`. `println` on it prints above the bar (or plainly when hidden).
pub fn bar(len: u64, what: &str) -> ProgressBar {
    let b = ProgressBar::with_draw_target(Some(len), target());
    if let Ok(s) =
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} {elapsed_precise} eta {eta}")
    {
        b.set_style(s.progress_chars("=> "));
    }
    b.set_message(what.to_string());
    b
}

/// A spinner for a step of unknown length; the message is printed once when hidden.
pub fn spinner(what: &str) -> ProgressBar {
    let b = ProgressBar::with_draw_target(None, target());
    if b.is_hidden() {
        println!("{what}");
    }
    b.set_message(what.to_string());
    b.enable_steady_tick(std::time::Duration::from_millis(200));
    b
}

/// Prints `msg` above `b`, or on stdout when `b` is hidden (indicatif drops lines of hidden bars).
pub fn say(b: &ProgressBar, msg: impl AsRef<str>) {
    if b.is_hidden() {
        println!("{}", msg.as_ref());
    } else {
        b.println(msg);
    }
}
