//! The crate's floor rule, checked: the crate docs (`src/lib.rs`) list the
//! folders of `src/` as floors, and a folder may use only the folders on
//! the floors below its own. This reads every file's `crate::` paths
//! (comments aside) and fails on a folder that uses one on its own floor
//! or above (which is also how two folders would import each other), and
//! on a folder the table does not place.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// The floors of the crate docs' table, top first.
fn floors(lib: &str) -> Vec<Vec<String>> {
    let table = lib
        .split("```text\n")
        .nth(1)
        .and_then(|rest| rest.split("//! ```").next())
        .expect("the crate docs hold the floors in a text block");
    table
        .lines()
        .map(|line| line.trim_start_matches("//!").trim())
        .filter(|line| !line.is_empty())
        // Names, then two spaces or more, then what the floor is.
        .map(|line| {
            let names = line.split("  ").next().unwrap_or_default();
            names.split_whitespace().map(str::to_owned).collect()
        })
        .collect()
}

/// The top-level modules a file's code names through `crate::`.
fn used(code: &str) -> BTreeSet<String> {
    let code: String = code
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        match rest.strip_prefix('{') {
            // `crate::{a, b::c}`: the first name of each item at depth one.
            Some(group) => {
                let (mut depth, mut item_start, mut end) = (1, 0, group.len());
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 1 => {
                            found.insert(ident(&group[item_start..i]));
                            item_start = i + 1;
                        }
                        _ => {}
                    }
                    if depth == 0 {
                        found.insert(ident(&group[item_start..i]));
                        end = i;
                        break;
                    }
                }
                rest = &group[end..];
            }
            None => {
                found.insert(ident(rest));
            }
        }
    }
    found.remove("");
    found
}

fn ident(text: &str) -> String {
    text.trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// Every `.rs` file under `dir`.
fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_folder_uses_one_on_its_floor_or_above() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
    let floors = floors(&lib);
    let floor_of: BTreeMap<&str, usize> = floors
        .iter()
        .enumerate()
        .flat_map(|(floor, names)| names.iter().map(move |name| (name.as_str(), floor)))
        .collect();
    let mut all = vec![];
    files(&src, &mut all);
    let mut broken = vec![];
    for path in &all {
        let relative = path.strip_prefix(&src).unwrap();
        let top = relative.components().next().unwrap().as_os_str();
        let module = top.to_str().unwrap().trim_end_matches(".rs");
        if module == "lib" {
            continue;
        }
        let Some(&floor) = floor_of.get(module) else {
            broken.push(format!("{module}/ is on no floor of the crate docs"));
            continue;
        };
        for other in used(&fs::read_to_string(path).unwrap()) {
            if other == module {
                continue;
            }
            match floor_of.get(other.as_str()) {
                Some(&below) if below > floor => {}
                Some(_) => broken.push(format!(
                    "{} uses crate::{other}, which is not on a floor below {module}'s",
                    relative.display()
                )),
                None => broken.push(format!(
                    "{} uses crate::{other}, which is on no floor",
                    relative.display()
                )),
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_reader_sees_what_a_file_uses() {
    let code = "use crate::api::ApiError;\n\
                // crate::agent in a comment\n\
                use crate::{room, web::serve};\n\
                use crate::runtime::{body, clock};\n\
                let x = crate::text::first_chars(s, 3);";
    let names: Vec<String> = used(code).into_iter().collect();
    assert_eq!(names, ["api", "room", "runtime", "text", "web"]);
    let lib = "//! ```text\n//! front     the Worker\n//! agent sandbox    objects\n//! ```\n";
    assert_eq!(floors(lib), [vec!["front"], vec!["agent", "sandbox"]]);
}
