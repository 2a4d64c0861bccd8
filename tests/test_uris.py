"""The one place a URI becomes a path."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from lsp_server.text.uris import file_path, local_path, prompt_path


def test_file_uris_are_local_paths_percent_decoded() -> None:
    assert local_path("file:///home/ana/caf%C3%A9/a%20b.py") == ("/home/ana/café/a b.py", True)
    assert file_path("file:///home/ana/caf%C3%A9/%E6%97%A5.py") == Path("/home/ana/café/日.py")
    assert local_path("FILE:///x/y.py") == ("/x/y.py", True)


def test_other_schemes_are_not_local() -> None:
    assert local_path("untitled:Untitled-1") == ("Untitled-1", False)
    assert local_path("vscode-remote://ssh-remote+host/srv/a.py") == ("/srv/a.py", False)
    assert file_path("untitled:Untitled-1") is None
    assert file_path("/plain/path.py") is None  # a plain path is not a URI


def test_plain_paths_and_windows_drives_are_paths() -> None:
    assert local_path("/w/a.py") == ("/w/a.py", True)
    assert local_path(PurePosixPath("/w/b.py")) == ("/w/b.py", True)
    assert local_path("C:/w/a.py") == ("C:/w/a.py", True)  # one letter is a drive, not a scheme


def test_the_prompt_names_a_file_by_its_last_three_parts() -> None:
    assert prompt_path("file:///home/ana/proj/pkg/mod/%C3%A9t%C3%A9.py") == "pkg/mod/été.py"
    assert prompt_path("file:///w/calc.py") == "/w/calc.py"
    assert prompt_path("vscode-remote://ssh-remote+host/srv/app/main.py") == "srv/app/main.py"


def test_a_hash_or_question_mark_in_a_decoded_file_uri_is_part_of_the_name() -> None:
    # Documents are keyed by their percent-decoded URI: "file:///w/C%23/a.cs" is kept as below.
    assert file_path("file:///w/C#/proj/a.cs") == Path("/w/C#/proj/a.cs")
    assert prompt_path("file:///w/C#/proj/what?.cs") == "C#/proj/what?.cs"
    assert local_path("file://server/share/a.py") == ("/share/a.py", True)
    # Elsewhere a fragment names a part of the document (a notebook's cell), not the file.
    assert local_path("vscode-notebook-cell:/w/nb.ipynb#X1") == ("/w/nb.ipynb", False)
