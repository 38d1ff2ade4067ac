#!/bin/sh
wc -w < "$1" | tr -d ' '
