#!/bin/sh
# aipcc-build's `uv` entry point, first on PATH in every image aipcc-build renders: it keeps
# the uv commands that read no constraints to the image's toolkit, then runs the real uv
# (the next `uv` on PATH, or the index helper beside it when the image's wheel index needs
# authentication). POSIX sh and awk, no Python: it costs a uv command about 2 ms.
#
# - `uv run --with ...` reads neither UV_CONSTRAINT nor uv.toml's constraint-dependencies,
#   but it reads `-c FILE` in a requirements file: the command gets
#   `--with-requirements /etc/aipcc-uv-with.txt`, which holds that line.
# - `uv sync` and `uv run` in a project install what uv.lock says, and `uv lock` reads no
#   system-wide constraint-dependencies: the lock is checked against the constraints before
#   uv runs (locked first, with the real uv, where it is missing or older than its
#   pyproject.toml), and a lock of another release is refused before anything is installed.
#   A stamp in the project's .venv, carrying the checked lock's modification time, spares
#   reading an unchanged lock again.
# - `uv pip install|sync -r pylock.toml` refuses constraints altogether: the lock is checked
#   against them here instead, then installed without them.
# - A user's UV_CONSTRAINT and UV_BUILD_CONSTRAINT add to the image's file: uv reads a list
#   of files there. The deliberate override, UV_CONSTRAINT=/dev/null, turns all of this off.
constraints=/etc/aipcc-constraints.txt
with_file=/etc/aipcc-uv-with.txt
here=${0%/*}

refuse() {
    echo "uv: $1" >&2
    exit 1
}

# The real uv: the next `uv` on PATH that is not this file.
real=""
saved_ifs=$IFS
IFS=:
for directory in $PATH; do
    if [ -n "$directory" ] && [ "$directory" != "$here" ] && [ -f "$directory/uv" ] \
        && [ -x "$directory/uv" ]; then
        real=$directory/uv
        break
    fi
done
IFS=$saved_ifs
[ -n "$real" ] || { echo "uv: uv is not installed in this image (only aipcc-build's entry point in $here is on PATH)" >&2; exit 127; }
next=$real
[ -x "$here/aipcc-index-auth" ] && next=$here/aipcc-index-auth

case " ${UV_CONSTRAINT-} " in
    *" /dev/null "*) exec "$next" "$@" ;;
esac
[ -f "$constraints" ] || exec "$next" "$@"
case " ${UV_CONSTRAINT-} " in
    *" $constraints "*) ;;
    *) UV_CONSTRAINT="${UV_CONSTRAINT:+$UV_CONSTRAINT }$constraints"; export UV_CONSTRAINT ;;
esac
case " ${UV_BUILD_CONSTRAINT-} " in
    *" $constraints "*|*" /dev/null "*) ;;
    *) UV_BUILD_CONSTRAINT="${UV_BUILD_CONSTRAINT:+$UV_BUILD_CONSTRAINT }$constraints"
       export UV_BUILD_CONSTRAINT ;;
esac

# check_lock FILE WHAT: refuse FILE (uv.lock or pylock.toml) when it installs a
# distribution the constraints do not admit.
check_lock() {
    command -v awk >/dev/null 2>&1 || refuse "$2 cannot be checked against $constraints without awk, and this image keeps uv to its toolkit: install awk, or override deliberately: UV_CONSTRAINT=/dev/null UV_CONFIG_FILE=/dev/null uv ..."
    awk -v lock="$1" -v what="$2" -v file="$constraints" '
    function norm(name) { name = tolower(name); gsub(/[-_.]+/, "-", name); return name }
    function part(v, i,   parts, n) {
        n = split(v, parts, "."); if (i > n) return -1
        return parts[i] + 0
    }
    function compare(a, b,   i, x, y) {
        sub(/\+.*/, "", a); sub(/\+.*/, "", b)
        for (i = 1; i <= 6; i++) {
            x = part(a, i); y = part(b, i)
            if (x < 0 && y < 0) return 0
            if (x < 0) x = 0
            if (y < 0) y = 0
            if (x != y) return x < y ? -1 : 1
        }
        return 0
    }
    function admits(spec, v,   clauses, n, i, c, prefix) {
        n = split(spec, clauses, ",")
        for (i = 1; i <= n; i++) {
            c = clauses[i]
            if (c ~ /^==.*\.\*$/) {
                prefix = substr(c, 3, length(c) - 4)
                if (v != prefix && index(v, prefix ".") != 1) return 0
            } else if (c ~ /^==/) { if (v != substr(c, 3)) return 0 }
            else if (c ~ /^!=/) { if (v == substr(c, 3)) return 0 }
            else if (c ~ /^>=/) { if (compare(v, substr(c, 3)) < 0) return 0 }
            else if (c ~ /^<=/) { if (compare(v, substr(c, 3)) > 0) return 0 }
            else if (c ~ /^</) { if (compare(v, substr(c, 2)) >= 0) return 0 }
            else if (c ~ /^>/) { if (compare(v, substr(c, 2)) <= 0) return 0 }
        }
        return 1
    }
    function judge(   v) {
        if (name == "") return
        v = version
        if (v == "" && wheel != "") { split(wheel, fields, "-"); v = fields[2] }
        if (!(name in spec)) return
        if (v == "") { bad = bad "\n    " name " (no version: it cannot be checked)"; return }
        if (!admits(spec[name], v)) bad = bad "\n    " name " " v " (the image admits " name spec[name] ")"
    }
    FNR == NR {
        if ($0 ~ /^# aipcc-build constraints: /) release = substr($0, 28)
        if ($0 ~ /^[A-Za-z0-9]/) {
            line = $0; sub(/[ \t;].*/, "", line)
            match(line, /[=<>!~]/)
            if (RSTART > 1) spec[norm(substr(line, 1, RSTART - 1))] = substr(line, RSTART)
        }
        next
    }
    /^\[\[packages?\]\]/ { judge(); name = version = wheel = ""; inside = 1; next }
    /^\[/ { inside = 0; next }
    inside && /^name = "/ { name = $0; sub(/^name = "/, "", name); sub(/".*/, "", name); name = norm(name); next }
    inside && /^version = "/ { version = $0; sub(/^version = "/, "", version); sub(/".*/, "", version); next }
    wheel == "" && /\.whl/ { if (match($0, /[^\/" ]+\.whl/)) wheel = substr($0, RSTART, RLENGTH) }
    END {
        judge()
        if (bad != "") {
            printf "uv: %s installs what this %s image does not admit (%s keeps pip and uv to its toolkit; nothing was installed):%s\n", what, release, file, bad > "/dev/stderr"
            exit 1
        }
    }' "$constraints" "$1" || {
        if [ -n "${saved-}" ]; then
            mv -f "$saved" "$1"
            echo "uv: $1 is as it was before this command" >&2
        fi
        echo "uv: lock it in this image with versions of its release (pin them in pyproject.toml, or add the constraints to [tool.uv] constraint-dependencies), or override deliberately: UV_CONSTRAINT=/dev/null UV_CONFIG_FILE=/dev/null uv ..." >&2
        exit 1
    }
}

# The command: the first argument that is not a global option (or its value); its
# position; the project's directory (--project or --directory, before or after it).
command=""
project_dir=$PWD
position=0
seen=0
expect_value=""
for argument do
    seen=$((seen + 1))
    if [ -n "$expect_value" ]; then
        [ "$expect_value" = dir ] && project_dir=$argument
        expect_value=""
        continue
    fi
    case $argument in
        --) break ;;
        --directory|--project) expect_value=dir ;;
        --directory=*|--project=*) project_dir=${argument#*=} ;;
        --config-file|--cache-dir|--color|--python|-p|--allow-insecure-host|--with|\
        --with-editable|--with-requirements|--package|--extra|--group|--index|\
        --default-index|--find-links|-f|--index-url|--python-platform) expect_value=other ;;
        -*) ;;
        *) if [ -z "$command" ]; then command=$argument; position=$seen; else break; fi ;;
    esac
done

case $command in
    run)
        # The options between `run` and what it runs.
        with="" project=yes after=0 upgrades=""
        skip=""
        for argument do
            after=$((after + 1))
            [ "$after" -le "$position" ] && continue
            if [ "$skip" = upgrade ]; then upgrades="$upgrades --upgrade-package $argument"; fi
            if [ -n "$skip" ]; then skip=""; continue; fi
            case $argument in
                --with|--with-editable|--with-requirements) with=yes; skip=yes ;;
                --with=*|--with-editable=*|--with-requirements=*) with=yes ;;
                -U|--upgrade) upgrades="$upgrades --upgrade" ;;
                -P|--upgrade-package) skip=upgrade ;;
                --upgrade-package=*) upgrades="$upgrades $argument" ;;
                --no-project|--no-sync|--script|-s|--isolated) project="" ;;
                --) break ;;
                -*) ;;
                *) break ;;
            esac
        done
        if [ -n "$project" ]; then check_project=yes; fi
        if [ -n "$with" ]; then
            index=0
            for argument do
                index=$((index + 1))
                if [ "$index" -eq "$position" ]; then
                    set -- "$@" "$argument" --with-requirements "$with_file"
                else
                    set -- "$@" "$argument"
                fi
            done
            shift "$index"
        fi ;;
    sync)
        check_project=yes
        previous=""
        for argument do
            case $argument in
                --) break ;;
                -U|--upgrade) upgrades="$upgrades --upgrade" ;;
                --upgrade-package=*) upgrades="$upgrades $argument" ;;
            esac
            case $previous in
                -P|--upgrade-package) upgrades="$upgrades --upgrade-package $argument" ;;
            esac
            previous=$argument
        done ;;
    pip)
        previous=""
        for argument do
            case $previous in
                -r|--requirements|--requirement)
                    case ${argument##*/} in
                        pylock.toml|pylock.*.toml)
                            check_lock "$argument" "$argument"
                            UV_CONSTRAINT=""; export UV_CONSTRAINT ;;
                    esac ;;
            esac
            previous=$argument
        done ;;
esac

if [ -n "${check_project-}" ]; then
    directory=$project_dir
    while :; do
        if [ -f "$directory/pyproject.toml" ]; then
            # An upgrade locks again too: the lock uv would install is made here, then checked.
            if [ ! -f "$directory/uv.lock" ] || [ -n "${upgrades-}" ] \
                || [ "$directory/pyproject.toml" -nt "$directory/uv.lock" ]; then
                # The lock as it was comes back when the new one is refused.
                if [ -f "$directory/uv.lock" ]; then
                    saved=$directory/uv.lock.aipcc-before
                    cp -p "$directory/uv.lock" "$saved" || exit
                fi
                set -f
                # shellcheck disable=SC2086
                "$next" lock --quiet --project "$directory" ${upgrades-} || exit
                set +f
            fi
            # A lock checked before, unchanged since (the stamp has its modification time:
            # a lock copied in with an older one is checked too), is not read again.
            lock=$directory/uv.lock stamp=$directory/.venv/.aipcc-checked-lock
            if [ ! -f "$stamp" ] || [ "$lock" -nt "$stamp" ] || [ "$lock" -ot "$stamp" ] \
                || [ "$constraints" -nt "$stamp" ]; then
                check_lock "$lock" "$lock"
                [ -d "$directory/.venv" ] && touch -r "$lock" "$stamp" 2>/dev/null
            fi
            [ -n "${saved-}" ] && rm -f "$saved"
            break
        fi
        [ -z "$directory" ] || [ "$directory" = / ] && break
        directory=${directory%/*}
    done
fi
exec "$next" "$@"
