#!/usr/bin/env bash
# hack/release.sh VERSION: af's release, run by .github/workflows/release.yml (or a maintainer)
# on a clean checkout of the commit to release.
#
#   1. builds bin/af at this commit with VERSION stamped (af version names this commit),
#   2. pushes the action's image, which is also the App's (af's own image writer: no daemon),
#      to $AF_RELEASE_REPOSITORY:VERSION (default ghcr.io/antifailure/af),
#   3. writes that image by digest into action.yml, deploy/app/deployment.yaml and deploy/harden/, commits
#      them ("release VERSION") and tags that commit VERSION.
#
# Whoever uses antifailure/af@VERSION (or its commit id) runs exactly the image pushed here,
# never a tag that can be moved. The tag's commit is one after the commit the binary names:
# the pin cannot be inside the image it names. Pushing the commit and the tag is the caller's
# (release.yml pushes them); nothing is pushed to git here. Credentials for the registry come
# from the docker config (docker login, crane auth login).
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:-}
die() { echo "release: $*" >&2; exit 1; }
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "usage: hack/release.sh vMAJOR.MINOR.PATCH (got '${version}')"
want=$(sed -n 's/^const Release = "\(.*\)"$/\1/p' version/version.go)
[[ $version == "$want" ]] || die "$version is not version.Release ($want in version/version.go): action.yml and the docs name that one; change it first"
[[ -z $(git status --porcelain) ]] || die "the tree has changes: release a commit, not a work tree"
if git rev-parse -q --verify "refs/tags/$version" >/dev/null; then
	die "tag $version exists already: a release is never made twice"
fi
repo=${AF_RELEASE_REPOSITORY:-ghcr.io/antifailure/af}

CGO_ENABLED=0 make -s build VERSION="$version" >/dev/null # static, whatever the caller exported
source_commit=$(git rev-parse HEAD)
pinned=$(bin/af engine-image --action --push "$repo:$version")
[[ $pinned =~ ^[^[:space:]]+@sha256:[0-9a-f]{64}$ ]] || die "the push printed '$pinned', not a reference by digest"
echo "release: $version is $pinned (built from $source_commit)" >&2

# Exactly one image line in each, replaced whole; anything else is a refusal, not a guess.
pin() {
	local file=$1 pattern=$2 line=$3
	[[ $(grep -cE "$pattern" "$file") == 1 ]] || die "$file has not exactly one line matching $pattern"
	local tmp
	tmp=$(mktemp)
	awk -v pat="$pattern" -v line="$line" '$0 ~ pat { print line; next } { print }' "$file" >"$tmp"
	cat "$tmp" >"$file"
	rm -f "$tmp"
}
pin action.yml '^  image: docker://' "  image: docker://$pinned # $version"
pin deploy/app/deployment.yaml '^          image: ' "          image: $pinned # $version"
pin deploy/harden/harden.yaml '^          image: ' "          image: $pinned # $version"
pin deploy/harden/uninstall.yaml '^          image: ' "          image: $pinned # $version"

git -c user.name="${GIT_AUTHOR_NAME:-af release}" -c user.email="${GIT_AUTHOR_EMAIL:-release@antifailure.dev}" \
	commit -q -m "release $version: the action's and the App's image by digest" \
	-m "Image $pinned, built from $source_commit." action.yml deploy/app/deployment.yaml deploy/harden/harden.yaml deploy/harden/uninstall.yaml
git tag "$version"
echo "release: tagged $version at $(git rev-parse HEAD): push it with git push origin HEAD $version" >&2
echo "$pinned"
