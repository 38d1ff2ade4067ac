#!/bin/sh
set -e
printf 'a b\nc d\n' > /tmp/studio-eval-count.txt
[ "$(sh count.sh /tmp/studio-eval-count.txt)" = 2 ]
