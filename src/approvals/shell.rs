//! A bash command line read the way bash reads it, for the room's policy
//! (`policy`): which commands it would run, and whether it is nothing but
//! plain simple commands. It is no shell and runs nothing.
//!
//! It follows bash's quoting (`'…'`, `"…"`, `$'…'`, `$"…"`, backslashes,
//! line continuations), comments, control operators, redirections,
//! heredocs (their bodies are read, and searched for substitutions unless
//! the delimiter is quoted), `$(…)`, backticks, `<(…)`, `>(…)`, `${…}`,
//! `$((…))`, reserved words, `((…))`, `[[ … ]]` and function definitions.
//! It is lenient about what bash would refuse as a syntax error (such a
//! line runs nothing), and gives up (`ok` false) on what it does not fully
//! follow: an unbalanced quote or bracket, `case` (its patterns would cost
//! the upload more than they are worth), `coproc`, `$[…]`, a `$((` that is
//! no arithmetic, extglob patterns, brace expansion in a command's name,
//! NUL bytes, nesting deeper than 64.

use std::mem::take;

/// What a command line would run.
#[cfg_attr(test, derive(Debug))]
pub struct Line {
    /// Every simple command, wherever it sits (lists, compound commands,
    /// function bodies, substitutions, heredoc bodies), as its words after
    /// quote removal; leading assignments and redirections are left out,
    /// and an expansion (`$x`, `$(…)`) adds nothing to its word, as it may
    /// well add nothing in bash.
    pub cmds: Vec<Vec<Vec<u8>>>,
    /// Only simple commands joined by `;` `&&` `||` `|` `|&` `&` and
    /// newlines, each with a literal name and no leading assignment, no
    /// substitution, no expansion but `$NAME`, `${NAME}` and the special
    /// parameters (anything more can run code through a variable's value),
    /// no heredoc or here-string, and no redirection but between
    /// descriptors or to or from `/dev/null`.
    pub plain: bool,
    /// Read to the end with nothing given up on, and no brace expansion
    /// (`{rm,x}` is `rm x`, a command of its own when it comes first); when
    /// false, `cmds` may miss commands.
    pub ok: bool,
}

pub fn parse(src: &str) -> Line {
    let mut p = P::new(src.as_bytes(), 0, 0);
    let read = !src.as_bytes().contains(&0) && p.list(false).is_some();
    Line {
        cmds: p.cmds,
        plain: p.plain && read,
        ok: read && p.ok,
    }
}

/// Whether `word` is an assignment (`NAME=`, `NAME+=`, `NAME[…]=`). Any
/// `NAME[` counts: taking a word for an assignment can only make the next
/// one a command's name.
pub fn assignment(word: &[u8]) -> bool {
    let n = name_len(word);
    let first = word.first().copied().unwrap_or(b'0');
    let rest = word.get(n..).unwrap_or_default();
    n > 0 && !first.is_ascii_digit() && matches!(rest, [b'=' | b'[', ..] | [b'+', b'=', ..])
}

fn name_len(s: &[u8]) -> usize {
    s.iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
        .count()
}

/// Whether `c` ends an unquoted word (0 is the end of the line).
fn end(c: u8) -> bool {
    b"\0 \t\n;&|()<>".contains(&c)
}

/// Reserved words, matched by number in `keyword`; from `}` (16) on they
/// end a compound command.
const KEYWORDS: &[u8] =
    b"[[ for select function time case coproc ! { if then elif else while until do } fi done esac";

/// Redirection operators, longest first where one begins another.
const OPS: &[u8] = b"<<< <<- << <> <& < >> >| >& > &>> &>";

/// The words of a table written as one string (smaller than an array).
pub fn table(s: &'static [u8]) -> impl Iterator<Item = &'static [u8]> {
    s.split(|&c| c == b' ')
}

/// Where a list is: expecting a command's name, among its arguments, after
/// a compound command (only redirections, operators and reserved words
/// may follow), or among words that are no command (`for x in …`).
const CMD: u8 = 0;
const ARGS: u8 = 1;
const AFTER: u8 = 2;
const LIST: u8 = 3;

#[derive(Default)]
struct Word {
    t: Vec<u8>,
    /// Not literal: an expansion, a glob, braces or a leading `~`.
    odd: bool,
    /// Unquoted braces, maybe a brace expansion.
    brace: bool,
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
    depth: u8,
    cmds: Vec<Vec<Vec<u8>>>,
    plain: bool,
    ok: bool,
    /// Heredocs whose bodies start after the next newline: a byte of
    /// flags (1 `<<-`, 2 expanded), then the delimiter.
    docs: Vec<Vec<u8>>,
}

impl<'a> P<'a> {
    fn new(s: &'a [u8], i: usize, depth: u8) -> Self {
        P {
            s,
            i,
            depth,
            cmds: vec![],
            plain: true,
            ok: true,
            docs: vec![],
        }
    }

    #[inline(never)]
    fn at(&self, k: usize) -> u8 {
        self.s.get(self.i + k).copied().unwrap_or(0)
    }

    fn rest(&self) -> &'a [u8] {
        self.s.get(self.i..).unwrap_or_default()
    }

    fn since(&self, from: usize) -> &'a [u8] {
        self.s.get(from..self.i).unwrap_or_default()
    }

    /// Whether reserved word `k` is next, unquoted and whole.
    fn kw(&self, k: &[u8]) -> bool {
        self.rest().starts_with(k) && end(self.at(k.len()))
    }

    /// Skips blanks, line continuations and a comment.
    fn blanks(&mut self) {
        loop {
            match self.at(0) {
                b' ' | b'\t' => self.i += 1,
                b'\\' if self.at(1) == b'\n' => self.i += 2,
                b'#' => {
                    while !matches!(self.at(0), 0 | b'\n') {
                        self.i += 1
                    }
                }
                _ => return,
            }
        }
    }

    /// Commands up to the end, or with `close` up to an unmatched `)`.
    fn list(&mut self, close: bool) -> Option<()> {
        self.depth += 1;
        if self.depth > 64 {
            return None;
        }
        // Subshells begun here.
        let mut open = 0;
        let mut w = vec![];
        let mut st = CMD;
        loop {
            self.blanks();
            let c = self.at(0);
            let op = matches!(c, 0 | b')' | b'\n' | b';' | b'|') || c == b'&' && self.at(1) != b'>';
            if op && !w.is_empty() {
                self.cmds.push(take(&mut w));
            }
            match c {
                0 => {
                    self.depth -= 1;
                    return (open == 0 && !close).then_some(());
                }
                b')' => {
                    self.i += 1;
                    if open > 0 {
                        open -= 1;
                        st = AFTER;
                    } else if close {
                        self.depth -= 1;
                        return Some(());
                    } else {
                        return None;
                    }
                }
                b'\n' => {
                    self.nl()?;
                    st = CMD;
                }
                _ if op => {
                    let d = self.at(1);
                    let two = d == c || c != b'&' && d == b'&';
                    self.i += 1 + two as usize;
                    st = CMD;
                    // `;;`, `;&`: only in a case.
                    if c == b';' && two {
                        return None;
                    }
                }
                b'(' => {
                    self.i += 1;
                    self.plain = false;
                    if st == ARGS && w.len() == 1 {
                        // `name ()`: a function, whose name is no command
                        // and whose `()` reads as an empty subshell.
                        w.clear();
                        st = CMD;
                    }
                    if st != CMD {
                        return None;
                    }
                    if self.at(0) == b'(' {
                        self.i += 1;
                        self.arith(false)?;
                        st = AFTER;
                    } else {
                        open += 1;
                    }
                }
                _ => {
                    if self.redir()? {
                        continue;
                    }
                    if st != ARGS {
                        if let Some((k, kw)) = table(KEYWORDS).enumerate().find(|k| self.kw(k.1)) {
                            self.i += kw.len();
                            self.plain = false;
                            st = self.keyword(k)?;
                            continue;
                        }
                    }
                    let from = self.i;
                    let word = self.word()?;
                    if self.i == from || st == AFTER {
                        return None;
                    }
                    if st == CMD {
                        if assignment(self.since(from)) {
                            self.plain = false;
                            continue;
                        }
                        self.plain &= !word.odd;
                        st = ARGS;
                    }
                    if st == ARGS {
                        self.ok &= !word.brace;
                        w.push(word.t);
                    }
                }
            }
        }
    }

    /// What follows reserved word `k`, read; the state after it.
    fn keyword(&mut self, k: usize) -> Option<u8> {
        self.blanks();
        Some(match k {
            0 => {
                // Words to `]]`, where `<`, `(`, `&&`… are no operators.
                loop {
                    self.blanks();
                    let c = self.at(0);
                    if c == 0 || c == b';' {
                        return None;
                    } else if c == b'\n' {
                        self.nl()?;
                    } else if self.kw(b"]]") {
                        break;
                    } else if end(c) && !(matches!(c, b'<' | b'>') && self.at(1) == b'(') {
                        self.i += 1;
                    } else {
                        self.word()?;
                    }
                }
                self.i += 2;
                AFTER
            }
            1 | 2 if self.rest().starts_with(b"((") => {
                self.i += 2;
                self.arith(false)?;
                AFTER
            }
            1..=3 => {
                // The name of the variable or function; a function's `()`
                // reads as an empty subshell.
                self.word()?;
                if k == 3 {
                    CMD
                } else {
                    LIST
                }
            }
            4 => {
                if self.kw(b"-p") {
                    self.i += 2;
                }
                CMD
            }
            // `case` (its patterns are not followed) and `coproc`.
            5 | 6 => return None,
            16.. => AFTER,
            _ => CMD,
        })
    }

    /// A newline, then the bodies of the heredocs begun on its line.
    fn nl(&mut self) -> Option<()> {
        self.i += 1;
        let docs = take(&mut self.docs);
        for doc in &docs {
            let (&flags, delim) = doc.split_first()?;
            let from = self.i;
            let mut end = self.s.len();
            while self.at(0) != 0 {
                let start = self.i;
                while flags & 1 != 0 && self.at(0) == b'\t' {
                    self.i += 1;
                }
                let line = self.i;
                while !matches!(self.at(0), 0 | b'\n') {
                    self.i += 1;
                }
                let last = delim == self.since(line);
                if self.at(0) == b'\n' {
                    self.i += 1;
                }
                if last {
                    end = start;
                    break;
                }
            }
            if flags & 2 != 0 {
                let s = self.s;
                self.nested(s.get(..end).unwrap_or_default(), from, true)?;
            }
        }
        Some(())
    }

    /// Reads `s` from `i` on its own: a list, or a heredoc's body.
    fn nested(&mut self, s: &[u8], i: usize, body: bool) -> Option<()> {
        let mut p = P::new(s, i, self.depth);
        let done = if body {
            p.dq(0, &mut Word::default())
        } else {
            p.list(false)
        };
        self.cmds.append(&mut p.cmds);
        self.ok &= p.ok;
        self.plain = false;
        done
    }

    /// A redirection, if one is next: false (and nothing read) if not.
    fn redir(&mut self) -> Option<bool> {
        let from = self.i;
        while self.at(0).is_ascii_digit() {
            self.i += 1;
        }
        // `{name}>…` stores a new descriptor in a variable.
        let n = name_len(self.s.get(self.i + 1..).unwrap_or_default());
        let var = self.i == from && self.at(0) == b'{' && n > 0 && self.at(n + 1) == b'}';
        if var {
            self.i += n + 2;
        }
        let op = table(OPS)
            .enumerate()
            .find(|op| self.rest().starts_with(op.1));
        // `N&>` is no operator, and `<(`, `>(` are process substitutions.
        let Some((k, op)) = op.filter(|&(k, _)| {
            (k < 10 || self.i == from) && !((k == 5 || k == 9) && self.at(1) == b'(')
        }) else {
            self.i = from;
            return Some(false);
        };
        self.i += op.len();
        self.blanks();
        let at = self.i;
        let t = self.word()?;
        if self.i == at {
            return None;
        }
        if k == 1 || k == 2 {
            let quoted = self.since(at).iter().any(|c| b"'\"\\".contains(c));
            let mut doc = vec![(k == 1) as u8 | (!quoted as u8) << 1];
            doc.extend_from_slice(&t.t);
            self.docs.push(doc);
        }
        // `N>&M`, `N>&-`, `N>&M-`: descriptors, no file.
        let n = t.t.len();
        let dup = (k == 4 || k == 8)
            && n > 0
            && (t.t.iter().enumerate())
                .all(|(j, c)| c.is_ascii_digit() || *c == b'-' && j + 1 == n);
        if var || k < 3 || t.odd || !dup && t.t != b"/dev/null" {
            self.plain = false;
        }
        Some(true)
    }

    /// One word, after quote removal.
    fn word(&mut self) -> Option<Word> {
        let mut w = Word::default();
        let from = self.i;
        loop {
            let c = self.at(0);
            if matches!(c, b'<' | b'>') && self.at(1) == b'(' {
                self.i += 2;
                self.plain = false;
                self.list(true)?;
                w.odd = true;
                continue;
            }
            if end(c) {
                return Some(w);
            }
            self.i += 1;
            match c {
                b'\\' => {
                    let n = self.at(0);
                    if n == 0 {
                        return None;
                    }
                    self.i += 1;
                    if n != b'\n' {
                        w.t.push(n);
                    }
                }
                b'\'' => self.squote(&mut w.t)?,
                b'"' => self.dq(b'"', &mut w)?,
                b'$' if self.at(0) == b'\'' => {
                    self.i += 1;
                    self.ansi(&mut w.t)?;
                }
                b'$' if self.at(0) == b'"' => {}
                b'$' | b'`' => {
                    self.i -= 1;
                    w.odd |= self.expand(&mut w.t, false)?;
                }
                b'*' | b'?' | b'[' => {
                    w.odd = true;
                    w.t.push(c);
                }
                b'{' | b'}' => {
                    w.odd = true;
                    w.brace = true;
                    w.t.push(c);
                }
                b'~' if self.i == from + 1 => {
                    w.odd = true;
                    w.t.push(c);
                }
                _ => w.t.push(c),
            }
        }
    }

    /// The rest of a single-quoted string, after its `'`.
    fn squote(&mut self, t: &mut Vec<u8>) -> Option<()> {
        loop {
            let c = *self.s.get(self.i)?;
            self.i += 1;
            if c == b'\'' {
                return Some(());
            }
            t.push(c);
        }
    }

    /// The rest of a double-quoted string up to `end`, or a heredoc's body
    /// (`end` 0).
    fn dq(&mut self, end: u8, w: &mut Word) -> Option<()> {
        loop {
            let Some(&c) = self.s.get(self.i) else {
                return (end == 0).then_some(());
            };
            if c == b'$' || c == b'`' {
                w.odd |= self.expand(&mut w.t, true)?;
                continue;
            }
            self.i += 1;
            let n = self.at(0);
            if c == end {
                return Some(());
            } else if c == b'\\' && matches!(n, b'$' | b'`' | b'"' | b'\\' | b'\n') {
                self.i += 1;
                if n != b'\n' {
                    w.t.push(n);
                }
            } else {
                w.t.push(c);
            }
        }
    }

    /// An expansion at `$` or a backtick; false for a `$` that is only a
    /// `$`, added to `t`.
    fn expand(&mut self, t: &mut Vec<u8>, dq: bool) -> Option<bool> {
        let s = self.s;
        let tick = self.at(0) == b'`';
        self.i += 1;
        if tick {
            // Inside, `\$`, `\``, `\\` (and `\"` within double quotes) lose
            // their backslash before the text is read as commands.
            let mut inner = vec![];
            loop {
                let c = *s.get(self.i)?;
                self.i += 1;
                let n = self.at(0);
                if c == b'`' {
                    break;
                } else if c == b'\\' && (matches!(n, b'$' | b'`' | b'\\') || dq && n == b'"') {
                    inner.push(n);
                    self.i += 1;
                } else {
                    inner.push(c);
                }
            }
            self.nested(&inner, 0, false)?;
        } else {
            match self.at(0) {
                b'(' if self.at(1) == b'(' => {
                    self.i += 2;
                    self.plain = false;
                    self.arith(dq)?;
                }
                b'(' => {
                    self.i += 1;
                    self.plain = false;
                    self.list(true)?;
                }
                b'{' => {
                    self.i += 1;
                    let start = self.i;
                    self.skip(b'}', dq)?;
                    let inner = self.s.get(start..self.i - 1).unwrap_or_default();
                    // Only `${NAME}`, `${1}`, `${@}`… run nothing.
                    let n = name_len(inner);
                    let first = inner.first().copied().unwrap_or(b'0');
                    let name = n == inner.len() && (n == 1 || !first.is_ascii_digit());
                    if !(name || inner.len() == 1 && b"@*#?-$!".contains(&first)) {
                        self.plain = false;
                    }
                }
                // `$[…]`, the old arithmetic.
                b'[' => return None,
                c if c == b'_' || c.is_ascii_alphabetic() => self.i += name_len(self.rest()),
                c if b"@*#?-$!0123456789".contains(&c) => self.i += 1,
                _ => {
                    t.push(b'$');
                    return Some(false);
                }
            }
        }
        Some(true)
    }

    /// Reads through the `end` (`}` or `)`) that closes what is open, and
    /// the quotes and substitutions before it.
    fn skip(&mut self, end: u8, dq: bool) -> Option<()> {
        self.depth += 1;
        if self.depth > 64 {
            return None;
        }
        let mut depth = 0;
        let mut w = Word::default();
        loop {
            let c = *self.s.get(self.i)?;
            if c == b'$' || c == b'`' {
                self.expand(&mut w.t, dq)?;
                continue;
            }
            self.i += 1;
            match c {
                _ if c == end && depth == 0 => break,
                b'"' => self.dq(b'"', &mut w)?,
                // Within double quotes bash reads `'` in `${…}` by the
                // operator; not followed.
                b'\'' if dq => return None,
                b'\'' => self.squote(&mut w.t)?,
                b'\\' => self.i += 1,
                b'(' => depth += 1,
                b')' if depth > 0 => depth -= 1,
                _ => {}
            }
        }
        self.depth -= 1;
        Some(())
    }

    /// Arithmetic after `((`, through its `))`.
    fn arith(&mut self, dq: bool) -> Option<()> {
        self.skip(b')', dq)?;
        // `$((a) )` would be a subshell in `$(…)`: not followed.
        (self.at(0) == b')').then(|| self.i += 1)
    }

    /// The rest of a `$'…'` string, its escapes decoded.
    fn ansi(&mut self, t: &mut Vec<u8>) -> Option<()> {
        // After a NUL, bash drops the rest of the string.
        let mut cut = false;
        loop {
            let c = *self.s.get(self.i)?;
            self.i += 1;
            let mut v = c as u32;
            if c == b'\'' {
                return Some(());
            }
            if c == b'\\' {
                let e = self.at(0);
                self.i += 1;
                v = e as u32;
                // Octal, `\x`, `\u`, `\U`: at most 3, 2, 4, 8 digits.
                let (radix, mut max) = match e {
                    b'0'..=b'7' => {
                        self.i -= 1;
                        (8, 3)
                    }
                    b'x' => (16, 2),
                    b'u' => (16, 4),
                    b'U' => (16, 8),
                    _ => (16, 0),
                };
                let named = b"abefnrtvE".iter().position(|&x| x == e);
                if let Some(&x) = named.and_then(|k| b"\x07\x08\x1b\x0c\n\r\t\x0b\x1b".get(k)) {
                    v = x as u32;
                } else if max > 0 && (self.at(0) as char).is_digit(radix) {
                    v = 0;
                    while let Some(d) = (self.at(0) as char).to_digit(radix).filter(|_| max > 0) {
                        v = v * radix + d;
                        self.i += 1;
                        max -= 1;
                    }
                    // A character past ASCII comes out as a byte no rule has.
                    if e | 32 == b'u' && v > 127 {
                        v = 255;
                    }
                } else if !b"\\'\"?".contains(&e) {
                    t.push(b'\\');
                }
            }
            cut |= v == 0;
            if !cut {
                t.push(v as u8);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmds(src: &str) -> Vec<Vec<String>> {
        let line = parse(src);
        assert!(line.ok, "{src:?} not understood");
        strings(line.cmds)
    }

    fn strings(cmds: Vec<Vec<Vec<u8>>>) -> Vec<Vec<String>> {
        let text = |w: Vec<u8>| String::from_utf8(w).unwrap();
        cmds.into_iter()
            .map(|c| c.into_iter().map(text).collect())
            .collect()
    }

    #[test]
    fn words_after_quote_removal() {
        assert_eq!(
            cmds(
                r#"'a b'c "d\"e\q" \f $'\x72\155\t' $"g" "$x" 'it''s' l\
s"#
            ),
            [["a bc", "d\"e\\q", "f", "rm\t", "g", "", "its", "ls"]]
        );
        assert_eq!(cmds("echo $'a\\0b'c"), [["echo", "ac"]]);
        assert_eq!(cmds("echo $'\\u72\\U6d\\x\\q'"), [["echo", "rm\\x\\q"]]);
        assert_eq!(parse("echo $'\\u00e9\\xe9'").cmds[0][1], [255, 0xe9]);
    }

    #[test]
    fn lists_pipelines_and_comments() {
        assert_eq!(
            cmds("cd src && FOO=1 BAR=x make -j2 | tee log; ls\n  X=1"),
            [
                vec!["cd", "src"],
                vec!["make", "-j2"],
                vec!["tee", "log"],
                vec!["ls"]
            ]
        );
        assert_eq!(
            cmds("a|&b||c&d;e # f; g\n#h\ni#j"),
            [["a"], ["b"], ["c"], ["d"], ["e"], ["i#j"]]
        );
        assert_eq!(
            cmds("cat 'a;b' \"c|d\" e\\&f"),
            [["cat", "a;b", "c|d", "e&f"]]
        );
        assert!(cmds("").is_empty() && cmds("  # only a comment").is_empty());
        assert!(parse("a && b | c").plain);
    }

    #[test]
    fn redirections_are_no_words() {
        let line = parse("ls 2>&1 >/dev/null <&0 3>&- &>/dev/null x 2>>/dev/null");
        assert!(line.plain);
        assert_eq!(strings(line.cmds), [["ls", "x"]]);
        assert_eq!(
            cmds("a 2>f b >|f c <>f d &>>f e"),
            [["a", "b", "c", "d", "e"]]
        );
        for src in [
            "ls >f",
            "ls 2>f",
            "ls >&f",
            "ls < f",
            "ls {fd}>/dev/null",
            "ls >$x",
        ] {
            let line = parse(src);
            assert!(line.ok && !line.plain, "{src}");
            assert_eq!(strings(line.cmds), [["ls"]], "{src}");
        }
        assert_eq!(
            cmds("echo 2>(a) b<(c)"),
            [vec!["a"], vec!["c"], vec!["echo", "2", "b"]]
        );
    }

    #[test]
    fn heredoc_bodies_are_consumed() {
        assert_eq!(cmds("cat <<EOF\nrm x\nEOF\nls"), [["cat"], ["ls"]]);
        assert_eq!(
            cmds("cat <<-E; ls\n\trm\n\tE\nwc"),
            [["cat"], ["ls"], ["wc"]]
        );
        assert_eq!(
            cmds("cat <<E\n$(rm a) `rm b`\nE"),
            [vec!["cat"], vec!["rm", "a"], vec!["rm", "b"]]
        );
        assert_eq!(
            cmds("cat <<'E' <<\\F\n$(rm a)\nE\n$(rm b)\nF\nls"),
            [["cat"], ["ls"]]
        );
        assert_eq!(cmds("a=$(cat <<E\n)\nE\n); b"), [["cat"], ["b"]]);
        assert!(!parse("cat <<E\nx\nE").plain);
        assert!(!parse("cat <<< x").plain);
    }

    #[test]
    fn substitutions_are_commands_too() {
        assert_eq!(
            cmds("a $(b $(c)) \"`d \\`e\\``\" <(f) >(g) x=$(h) ${y:-$(i)} r$((1+$(j)))m"),
            [
                vec!["c"],
                vec!["b", ""],
                vec!["e"],
                vec!["d", ""],
                vec!["f"],
                vec!["g"],
                vec!["h"],
                vec!["i"],
                vec!["j"],
                vec!["a", "", "", "", "", "x=", "", "rm"],
            ]
        );
        assert_eq!(
            cmds("echo '$(a)' \\$\\(b\\) \"\\$(c)\""),
            [["echo", "$(a)", "$(b)", "$(c)"]]
        );
        assert_eq!(
            cmds("echo \"${x:-\"$(a)\"}\""),
            [vec!["a"], vec!["echo", ""]]
        );
    }

    #[test]
    fn compound_commands() {
        let all = "if a; then b; elif c; else d; fi; while e; do f; done; until g; do :; done
            for x in h $(i); do j; done; for ((k = 0; k < $(l); k++)); do m; done
            select x in y; do n; done; { x; }; (y; (z)); ! ab; time -p cd
            [[ -n $(ef) && a < b || ( c ) ]] && gh; ((n = $(ij))); f() { kl; }
            function g { mn; }; function h() { op; }";
        let line = parse(all);
        assert!(line.ok && !line.plain);
        let names: Vec<String> = strings(line.cmds)
            .into_iter()
            .map(|c| c[0].clone())
            .collect();
        assert_eq!(
            names.join(" "),
            "a b c d e f g : i j l m n x y z ab cd ef gh ij kl mn op"
        );
        for src in [
            "(a)",
            "{ a; }",
            "! a",
            "time a",
            "f() { a; }",
            "[[ a ]]",
            "((a))",
            "if a; then b; fi",
        ] {
            assert!(!parse(src).plain, "{src}");
        }
    }

    #[test]
    fn what_is_not_understood() {
        for src in [
            "echo 'a",
            "echo \"a",
            "echo $(a",
            "echo `a",
            "echo a\\",
            "echo ${a",
            "(a",
            "a)",
            "a; fi b",
            "coproc a",
            "echo $[1]",
            "echo $((a) )",
            "ls !(x)",
            "ls @(a|b)",
            "a b (c)",
            "{rm,-rf,x}",
            "echo \"${x:-'}\"",
            "a\0b",
            "case a in b) c;; esac",
            "[[ a",
        ] {
            assert!(!parse(src).ok, "{src:?}");
        }
        assert!(!parse("x [[|[[&&( a=$(rm x) !").ok);
        let deep = "$(".repeat(1000);
        assert!(!parse(&deep).ok);
        assert!(!parse(&"${x:-".repeat(1000)).ok);
    }

    #[test]
    fn any_line_is_read_to_an_end() {
        // Lines of bash's special tokens, from a fixed seed: none may panic
        // or loop.
        let tokens = [
            "[[", "]]", "((", "))", "$(", "${", "$((", "<(", ">(", "<<", "<<-", "<<<", "'", "\"",
            "\\", "`", "(", ")", "{", "}", "&", "|", ";", "!", " ", "\n", "\t", "#", "a", "=", "E",
            "$", "*", "<", ">", ">&", "&>", "2", "for", "if", "then", "fi", "do", "done", "time",
            "function", "case", "$'", "\\\n",
        ];
        let mut seed: u32 = 1;
        let mut next = || {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (seed >> 16) as usize
        };
        for _ in 0..50_000 {
            let mut line = String::new();
            for _ in 0..next() % 12 {
                line.push_str(tokens[next() % tokens.len()]);
            }
            parse(&line);
        }
    }

    #[test]
    fn assignments() {
        assert!(assignment(b"a=1") && assignment(b"_a+=x") && assignment(b"a[$(x)]=1"));
        assert!(assignment(b"a[x"));
        assert!(
            !assignment(b"1a=1")
                && !assignment(b"=1")
                && !assignment(b"a")
                && !assignment(b"a-b=1")
        );
        let line = parse("a=1 b=$(c) d e=f");
        assert!(!line.plain);
        assert_eq!(strings(line.cmds), [vec!["c"], vec!["d", "e=f"]]);
    }
}
