//! Progress of a sitting: on a terminal, a bar with the phase and the time left
//! (indicatif); off a terminal (a pod's log), one line per phase change and every 30 s.
//! [`StatusLine`]: lines on stderr under one updating status line, for following a sitting
//! from outside (`leaderwatch sitting`).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

const LOG_EVERY: Duration = Duration::from_secs(30);

pub struct Progress {
    tty: bool,
    bar: Option<ProgressBar>,
    phase: String,
    total: Option<Duration>,
    last_log: Instant,
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress {
    pub fn new() -> Self {
        Progress {
            tty: std::io::stderr().is_terminal(),
            bar: None,
            phase: String::new(),
            total: None,
            last_log: Instant::now(),
        }
    }

    /// A new phase; `total` is its planned length, `None` when it ends on a condition.
    pub fn phase(&mut self, name: &str, total: Option<Duration>) {
        self.finish();
        self.phase = name.to_owned();
        self.total = total;
        self.last_log = Instant::now();
        let planned =
            total.map_or("until healthy".to_owned(), |t| humantime::format_duration(t).to_string());
        if self.tty {
            let bar = match total {
                Some(t) => {
                    let b = ProgressBar::new(t.as_millis() as u64);
                    b.set_style(
                        ProgressStyle::with_template(
                            "{prefix:>24} [{bar:30}] {elapsed_precise} / {msg}",
                        )
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                    );
                    b.set_message(format!("{planned}, {} left", humantime::format_duration(t)));
                    b
                }
                None => {
                    let b = ProgressBar::new_spinner();
                    b.enable_steady_tick(Duration::from_millis(200));
                    b
                }
            };
            bar.set_prefix(name.to_owned());
            self.bar = Some(bar);
        } else {
            tracing::info!(phase = name, planned, "phase started");
        }
    }

    /// Time spent in the phase so far, and a note (e.g. what the healthy list still lacks).
    pub fn tick(&mut self, elapsed: Duration, note: &str) {
        let left = self.total.map(|t| t.saturating_sub(elapsed));
        if let Some(b) = &self.bar {
            match left {
                Some(l) => {
                    b.set_position(elapsed.as_millis() as u64);
                    b.set_message(format!(
                        "{} left",
                        humantime::format_duration(Duration::from_secs(l.as_secs()))
                    ));
                }
                None => b.set_message(format!("{}s: {note}", elapsed.as_secs())),
            }
        } else if self.last_log.elapsed() >= LOG_EVERY {
            self.last_log = Instant::now();
            let left = left
                .map(|l| humantime::format_duration(Duration::from_secs(l.as_secs())).to_string());
            tracing::info!(phase = %self.phase, elapsed_s = elapsed.as_secs(), left, note, "progress");
        }
    }

    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// Off a terminal, the status line this often.
const STATUS_EVERY: Duration = Duration::from_secs(60);

/// Lines on stderr (above the status line on a terminal), and one status line: updated in
/// place on a terminal, printed once a minute with `prefix` off one (a CI log).
pub struct StatusLine {
    bar: Option<ProgressBar>,
    prefix: &'static str,
    last_status: Instant,
}

impl StatusLine {
    pub fn new(prefix: &'static str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new_spinner();
            b.enable_steady_tick(Duration::from_millis(250));
            b
        });
        StatusLine { bar, prefix, last_status: Instant::now() }
    }

    pub fn line(&self, s: &str) {
        match &self.bar {
            Some(b) => b.println(s),
            None => eprintln!("{s}"),
        }
    }

    /// The one updating line on a terminal; off one, a line once a minute.
    pub fn status(&mut self, s: &str) {
        match &self.bar {
            Some(b) => b.set_message(s.to_owned()),
            None if self.last_status.elapsed() >= STATUS_EVERY => {
                self.last_status = Instant::now();
                eprintln!("{}{s}", self.prefix);
            }
            None => {}
        }
    }

    /// Clears the status line (the lines stay).
    pub fn done(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
