#!/bin/sh
# git for a session that holds the token: relay_token::sandbox::git_guard explains it.
# In the project's repository, git runs with that repository pinned (GIT_DIR, GIT_COMMON_DIR,
# GIT_WORK_TREE), so a `commondir` or a `.git` written meanwhile by another session redirects
# nothing; in another repository inside a folder the sandbox is shown, git does not run.
real=$RELAY_GIT
if [ -z "$real" ]; then
    echo "relay: RELAY_GIT is not set" >&2
    exit 128
fi
# Appends $1 to $globals, single-quoted for eval. Built-ins only: Claude Code passes git some
# thirty global options, and a process per option made each of its git calls slow.
q() {
    rest=$1
    quoted=
    while :; do
        case $rest in
        *\'*)
            quoted="$quoted${rest%%\'*}'\\''"
            rest=${rest#*\'}
            ;;
        *) break ;;
        esac
    done
    globals="$globals'$quoted$rest' "
}
globals=
take=0
for a in "$@"; do
    if [ "$take" = 1 ]; then
        q "$a"
        take=0
        continue
    fi
    case $a in
    -C | -c | --git-dir | --work-tree | --namespace | --config-env | --super-prefix | --attr-source)
        q "$a"
        take=1
        ;;
    --*=* | -p | -P | --paginate | --no-pager | --bare | --no-replace-objects | --no-lazy-fetch | \
        --literal-pathspecs | --glob-pathspecs | --noglob-pathspecs | --icase-pathspecs | \
        --no-optional-locks | --no-advice)
        q "$a"
        ;;
    *) break ;;
    esac
done
# Where git would work: rev-parse runs no driver, filter, hook or monitor. One call asks for
# the work tree too (Claude Code makes about ten git calls a turn, each a process more); where
# there is none (the git folder itself), --show-toplevel fails, and the call is made without it.
ask='rev-parse --path-format=absolute --git-dir --git-common-dir --is-inside-work-tree'
found=$(eval "exec \"\$real\" $globals $ask --show-toplevel" 2>/dev/null) ||
    found=$(eval "exec \"\$real\" $globals $ask" 2>/dev/null) ||
    exec "$real" "$@"
# Its three lines (and the work tree's after them, when there), read by the shell itself.
gitdir= common= inside=
{
    IFS= read -r gitdir
    IFS= read -r common
    IFS= read -r inside
} <<EOF
$found
EOF
nl='
'
top=${found#*"$nl"*"$nl"*"$nl"}
[ "$top" = "$found" ] && top=
own=$RELAY_GIT_COMMON_DIR
within() { case $1/ in "$2"/*) return 0 ;; esac; return 1; }
shared() {
    while IFS= read -r d; do
        [ -n "$d" ] && within "$1" "$d" && return 0
    done <<EOF
$RELAY_GIT_SHARED
EOF
    return 1
}
# The project's repository: its own git folder or a linked worktree's, with its own common
# folder; or a submodule's git folder, which is its own common folder (a `commondir` planted
# there would name a folder of a session's making).
# A linked worktree's or a submodule's git folder only when the launch found it
# (RELAY_GIT_LINKED): a submodule's git folder is writable, so a folder a session made inside
# one is no git folder of the project's.
listed() {
    while IFS= read -r d; do
        [ -n "$d" ] && [ "$d" = "$1" ] && return 0
    done <<EOF
$RELAY_GIT_LINKED
EOF
    return 1
}
main_or_worktree() { [ "$common" = "$own" ] && { [ "$gitdir" = "$own" ] || { within "$gitdir" "$own/worktrees" && listed "$gitdir"; }; }; }
submodule() { within "$gitdir" "$own/modules" && [ "$common" = "$gitdir" ] && listed "$gitdir"; }
if [ -n "$own" ] && { main_or_worktree || submodule; }; then
    if [ "$inside" = true ]; then
        [ -n "$top" ] || exit 128
        GIT_WORK_TREE=$top
        export GIT_WORK_TREE
    fi
    GIT_DIR=$gitdir
    GIT_COMMON_DIR=$common
    export GIT_DIR GIT_COMMON_DIR
    if [ "$inside" != true ]; then
        # In the git folder itself: no work tree, as git would have it.
        exec "$real" --bare "$@"
    fi
    exec "$real" "$@"
fi
if shared "$gitdir" || shared "$common"; then
    echo "relay: git beside the token runs only in the project's repository${own:+ ($own)}; $gitdir is a repository another session may have written" >&2
    exit 128
fi
exec "$real" "$@"
