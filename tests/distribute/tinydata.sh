# Sourced by the distributed tests: tiny_data DIR writes a small IDX data
# set (1024 random 28x28 images, labels 0-9, gzip'd) into DIR, so that the
# ranks start at once even in a sanitizer build.
tiny_data() {
    local n=1024 labels="" i split
    be32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)); }
    for i in $(seq 0 $((n - 1))); do labels+=$(printf '\\x%02x' $((i % 10))); done
    for split in train t10k; do
        { printf "\\x00\\x00\\x08\\x03$(be32 $n)$(be32 28)$(be32 28)"; head -c $((n * 784)) /dev/urandom; } |
            gzip >"$1/$split-images-idx3-ubyte.gz"
        printf "\\x00\\x00\\x08\\x01$(be32 $n)$labels" | gzip >"$1/$split-labels-idx1-ubyte.gz"
    done
}
