//! Two instances on one repository (seed 002, issue-322) through the real binary: two
//! machines, each its own state root, service and tmux, polling one simulated GitHub. A
//! start addressed to one (`instance:<name>`) is taken by exactly that one, and from then
//! on the work item is that one's alone; an unaddressed start in `addressed` mode is taken
//! by neither; a `locked` instance takes nothing new, even when addressed.

use loop_sim::test_support::{read_lines, wait_for};

use crate::machine::{Machine, World};

const REPO: &str = World::REPO;
const LABEL: &str = "the-loop: auto-execute";

fn instance(name: &str, scope: &str) -> String {
    format!("instance:\n  name: {name}\n  scope: {scope}\n")
}

/// The `reason` of each line refusing something on issue `number`, in log order.
fn refusals(machine: &Machine, number: u64) -> Vec<String> {
    let item = serde_json::Value::from(format!("github:{REPO}#{number}"));
    read_lines(&machine.root.join("logs/events.jsonl"))
        .values
        .into_iter()
        .filter(|line| line["event"] == "dispatch.dropped" || line["event"] == "control.rejected")
        .filter(|line| {
            line["work_item"] == item
                || line["work_items"].as_array().is_some_and(|items| items.contains(&item))
        })
        .filter_map(|line| line["reason"].as_str().map(str::to_owned))
        .collect()
}

fn has_session(machine: &Machine, number: u64) -> bool {
    let item = format!("github:{REPO}#{number}");
    let shown = machine.run(&["sessions", "show", "--work-item", &item, "--json"]);
    serde_json::from_str::<serde_json::Value>(&shown.stdout)
        .is_ok_and(|shown| !shown["session"].is_null())
}

#[test]
fn a_start_addressed_to_one_instance_is_taken_by_that_one_alone() {
    let world = World::new();
    let laptop = Machine::new(&world, &instance("laptop", "addressed"));
    let desktop = Machine::new(&world, &instance("desktop", "addressed"));
    let addressed = world.sim.open_issue(REPO, "octocat", "For the laptop", &[LABEL]).unwrap();
    let unaddressed = world.sim.open_issue(REPO, "octocat", "For nobody", &[LABEL]).unwrap();
    laptop.start();
    desktop.start();

    world.sim.comment(REPO, addressed, "octocat", "the-loop start instance:laptop").unwrap();
    world.sim.comment(REPO, unaddressed, "octocat", "the-loop start").unwrap();
    laptop.wait_for_message(&format!("github:{REPO}#{addressed}"));
    for machine in [&laptop, &desktop] {
        wait_for("both starts judged on both machines", || {
            let judged = |n| refusals(machine, n).len() + usize::from(has_session(machine, n));
            (judged(unaddressed) >= 1 && judged(addressed) >= 1).then_some(()).ok_or("not yet")
        });
    }
    assert!(has_session(&laptop, addressed));
    assert!(!has_session(&desktop, addressed), "the other instance took nothing");
    assert_eq!(refusals(&desktop, addressed), ["addressed-elsewhere"]);
    for machine in [&laptop, &desktop] {
        assert!(!has_session(machine, unaddressed), "an unaddressed start is nobody's");
        assert_eq!(refusals(machine, unaddressed), ["unaddressed"]);
    }
    // One announcement, by the instance that took it; nothing on the other issue.
    let viewer = world.sim.viewer();
    let announced = world.sim.comments_by(REPO, addressed, viewer);
    assert_eq!(announced.len(), 1, "{announced:#?}");
    assert!(announced[0].contains("| instance | `laptop` |"), "{announced:#?}");
    assert_eq!(world.sim.comments_by(REPO, unaddressed, viewer), Vec::<String>::new());

    // From now on the item is the laptop's: an unaddressed comment reaches its session,
    // and the desktop still leaves it alone.
    world.sim.comment(REPO, addressed, "octocat", "Please also update the docs.").unwrap();
    laptop.wait_for_message("Please also update the docs.");
    wait_for("the desktop to judge the comment", || {
        (refusals(&desktop, addressed).len() == 2)
            .then_some(())
            .ok_or_else(|| format!("{:?}", refusals(&desktop, addressed)))
    });
    assert_eq!(refusals(&desktop, addressed), ["addressed-elsewhere", "unaddressed"]);
    assert!(!has_session(&desktop, addressed));
}

#[test]
fn a_locked_instance_takes_no_new_work_item_even_when_addressed() {
    let world = World::new();
    let locked = Machine::new(&world, &instance("laptop", "locked"));
    let number = world.sim.open_issue(REPO, "octocat", "Work", &[LABEL]).unwrap();
    locked.start();
    world.sim.comment(REPO, number, "octocat", "the-loop start instance:laptop").unwrap();
    wait_for("the start judged", || {
        let refused = refusals(&locked, number);
        (!refused.is_empty()).then_some(refused).ok_or("not yet")
    });
    assert_eq!(refusals(&locked, number), ["instance-locked"]);
    assert!(!has_session(&locked, number));
}
