#!/usr/bin/env python3
"""Regenerate the trimmed GitHub API descriptions the contract tests check against.

Downloads (with `npm pack`, into a temp dir) the official OpenAPI description
(`@octokit/openapi`) and the webhook payload examples (`@octokit/webhooks-examples`), and
writes only what the-loop uses:

- crates/loop-github/tests/fixtures/github-openapi.json: the operations the client calls
  (OPERATIONS below), with every component they reference, descriptions and examples
  dropped;
- crates/loop-sim/fixtures/webhook-examples.json: one example per (event, action) the
  simulator emits (WEBHOOKS below);
- crates/loop-github/tests/fixtures/github-graphql-schema.json: the GraphQL types and
  fields the client asks for and the simulator answers (GRAPHQL_FIELDS below), from
  `@octokit/graphql-schema`'s introspection result.

All three packages are MIT-licensed; their licence text is written beside the fixtures.
Usage: scripts/trim-github-fixtures.py [--openapi-version V] [--webhooks-version V]
                                      [--graphql-version V]
Keep OPERATIONS in step with crates/loop-github/src/api.rs (a test checks it).
"""
import argparse
import json
import pathlib
import subprocess
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
OPENAPI_OUT = ROOT / "crates/loop-github/tests/fixtures/github-openapi.json"
WEBHOOKS_OUT = ROOT / "crates/loop-sim/fixtures/webhook-examples.json"
GRAPHQL_OUT = ROOT / "crates/loop-github/tests/fixtures/github-graphql-schema.json"

# Keep in step with crates/loop-sim/src/graphql.rs (what the simulator resolves).
GRAPHQL_FIELDS = {
    "Query": ["repository"],
    "Repository": ["id", "name", "nameWithOwner", "owner", "pullRequest", "issue"],
    "RepositoryOwner": ["login"],
    "PullRequest": ["id", "number", "title", "url", "state", "repository", "closingIssuesReferences"],
    "Issue": ["id", "number", "title", "url", "state", "repository"],
    "IssueConnection": ["nodes", "totalCount"],
    "Mutation": ["addReaction"],
    "AddReactionPayload": ["reaction", "subject"],
    "Reaction": ["content", "id"],
    "Reactable": ["id"],
}
GRAPHQL_INPUTS = {"AddReactionInput": ["clientMutationId", "content", "subjectId"]}
GRAPHQL_ENUMS = ["IssueState", "PullRequestState", "ReactionContent"]

OPERATIONS = [
    ("get", "/repos/{owner}/{repo}/issues"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/labels"),
    ("delete", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/reactions"),
    ("post", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions"),
    ("post", "/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions"),
    ("get", "/repos/{owner}/{repo}/pulls"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/comments"),
    ("get", "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs"),
    ("get", "/repos/{owner}/{repo}/actions/jobs/{job_id}/logs"),
    ("get", "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations"),
]

# (The examples package has no `issues.closed`; its shape is `issues.opened`'s with
# `action: closed`, which the simulator test checks against `issues.opened`.)
WEBHOOKS = [
    ("issues", "opened"),
    ("issues", "labeled"),
    ("issue_comment", "created"),
    ("pull_request", "opened"),
    ("pull_request", "closed"),
    ("pull_request_review", "submitted"),
    ("pull_request_review_comment", "created"),
    ("workflow_run", "completed"),
]

DROP_KEYS = {"description", "example", "examples", "summary", "externalDocs", "x-github"}


def npm_pack(package, version, into):
    spec = f"{package}@{version}" if version else package
    out = subprocess.run(["npm", "pack", spec, "--json"], cwd=into, check=True,
                         capture_output=True, text=True).stdout
    filename = json.loads(out)[0]["filename"]
    target = into / package.replace("/", "_")
    with tarfile.open(into / filename) as tar:
        tar.extractall(target, filter="data")
    return target / "package", json.loads(out)[0]["version"]


def strip(node):
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k not in DROP_KEYS}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def refs_in(node, found):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                found.add(v)
            else:
                refs_in(v, found)
    elif isinstance(node, list):
        for v in node:
            refs_in(v, found)


def trim_openapi(doc):
    paths = {}
    for method, path in OPERATIONS:
        paths.setdefault(path, {})[method] = strip(doc["paths"][path][method])
    components = {}
    pending = set()
    refs_in(paths, pending)
    seen = set()
    while pending:
        ref = pending.pop()
        if ref in seen:
            continue
        seen.add(ref)
        _, _, kind, name = ref.split("/", 3)
        node = strip(doc["components"][kind][name])
        components.setdefault(kind, {})[name] = node
        refs_in(node, pending)
    components = {kind: dict(sorted(named.items())) for kind, named in sorted(components.items())}
    return {
        "openapi": doc["openapi"],
        "info": {"title": doc["info"]["title"], "version": doc["info"]["version"]},
        "paths": paths,
        "components": components,
    }


def strip_type(t):
    return {k: strip_type(v) if k == "ofType" and v else v for k, v in t.items() if k in ("kind", "name", "ofType")}


def trim_graphql(schema):
    types = {t["name"]: t for t in schema["types"]}
    out = []
    for name, fields in GRAPHQL_FIELDS.items():
        t = types[name]
        kept = []
        for field in t["fields"]:
            if field["name"] in fields:
                kept.append({
                    "name": field["name"],
                    "args": [{"name": a["name"], "type": strip_type(a["type"])} for a in field["args"]],
                    "type": strip_type(field["type"]),
                })
        missing = set(fields) - {f["name"] for f in kept}
        if missing:
            raise SystemExit(f"GitHub's schema lost {name}.{sorted(missing)}")
        out.append({"kind": t["kind"], "name": name, "fields": kept})
    for name, fields in GRAPHQL_INPUTS.items():
        kept = [{"name": f["name"], "type": strip_type(f["type"])} for f in types[name]["inputFields"] if f["name"] in fields]
        out.append({"kind": "INPUT_OBJECT", "name": name, "inputFields": kept})
    for name in GRAPHQL_ENUMS:
        out.append({"kind": "ENUM", "name": name, "enumValues": [{"name": v["name"]} for v in types[name]["enumValues"]]})
    return {"queryType": schema["queryType"], "mutationType": schema["mutationType"], "types": out}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--openapi-version", default="")
    parser.add_argument("--webhooks-version", default="")
    parser.add_argument("--graphql-version", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        openapi, openapi_version = npm_pack("@octokit/openapi", args.openapi_version, tmp)
        doc = json.loads((openapi / "generated/api.github.com.json").read_text())
        trimmed = trim_openapi(doc)
        trimmed["x-trimmed-from"] = f"@octokit/openapi@{openapi_version} generated/api.github.com.json by scripts/trim-github-fixtures.py"
        OPENAPI_OUT.write_text(json.dumps(trimmed, indent=1, sort_keys=False) + "\n")
        (OPENAPI_OUT.parent / "github-openapi.LICENSE").write_text(
            f"Trimmed from @octokit/openapi@{openapi_version} (https://github.com/octokit/openapi).\n\n"
            + (openapi / "LICENSE").read_text())

        graphql, graphql_version = npm_pack("@octokit/graphql-schema", args.graphql_version, tmp)
        schema = json.loads((graphql / "schema.json").read_text())["__schema"]
        trimmed_schema = {"__schema": trim_graphql(schema),
                          "x-trimmed-from": f"@octokit/graphql-schema@{graphql_version} schema.json by scripts/trim-github-fixtures.py"}
        GRAPHQL_OUT.write_text(json.dumps(trimmed_schema, indent=1) + "\n")
        (GRAPHQL_OUT.parent / "github-graphql-schema.LICENSE").write_text(
            f"Trimmed from @octokit/graphql-schema@{graphql_version} (https://github.com/octokit/graphql-schema).\n\n"
            + (graphql / "LICENSE.md").read_text())

        hooks, hooks_version = npm_pack("@octokit/webhooks-examples", args.webhooks_version, tmp)
        events = {e["name"]: e for e in json.loads((hooks / "api.github.com/index.json").read_text())}
        curated = {"x-curated-from": f"@octokit/webhooks-examples@{hooks_version} api.github.com/index.json by scripts/trim-github-fixtures.py"}
        for event, action in WEBHOOKS:
            example = next(x for x in events[event]["examples"] if x.get("action") == action)
            curated[f"{event}.{action}"] = example
        WEBHOOKS_OUT.write_text(json.dumps(curated, indent=1) + "\n")
        (WEBHOOKS_OUT.parent / "webhook-examples.LICENSE").write_text(
            f"Copied from @octokit/webhooks-examples@{hooks_version} (https://github.com/octokit/webhooks), "
            "licensed MIT:\n\nMIT License Copyright (c) Octokit contributors\n\n"
            "Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated documentation files (the \"Software\"), to deal in the Software without restriction, including without limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is furnished to do so, subject to the following conditions:\n\n"
            "The above copyright notice and this permission notice shall be included in all copies or substantial portions of the Software.\n\n"
            "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.\n")


if __name__ == "__main__":
    main()
